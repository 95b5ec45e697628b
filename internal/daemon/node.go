package daemon

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/sessions"
	"github.com/legionbsd/legion/internal/sys"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// Options configure a single-node cluster run in the foreground.
type Options struct {
	DataDir string // default ./.legion
	// RunDir holds task secrets and the resolver's zone; it must not be
	// under DataDir (default: a directory of the user's in /dev/shm where
	// it exists, else the system's temporary directory).
	RunDir    string
	Listen    string // the API, default 127.0.0.1:7470
	DNSListen string // the node resolver, default 127.0.0.1:5353
	// Upstreams for names outside the cluster; the host's when nil.
	Upstreams []string
	// PodOctet and VIPOctet place pods and VIPs in 127/8: pod
	// 10.200.n.h is 127.<PodOctet>.n.h, VIP 10.201.a.b is
	// 127.<VIPOctet>.a.b (200 and 201 by default). Nodes sharing a host
	// (tests) take different ones.
	PodOctet, VIPOctet byte
	// ResolverProcess runs the node resolver as a process of its own
	// (`legion node-resolver`, which outlives daemon restarts) rather than
	// in this one; the binary must be legion.
	ResolverProcess bool
	// RemovePods removes the node's pods when Run returns (legion up);
	// otherwise they keep running for the next daemon to adopt.
	RemovePods bool
	// Platform is what pods run on: PlatformJails or PlatformProcess
	// (DefaultPlatform when empty).
	Platform string
	// ZFSRoot is the dataset of images and container roots on a jails
	// node (DefaultZFSRoot when empty).
	ZFSRoot string
	// ExtIf is the interface published ports are redirected from on a
	// jails node; the default route's when empty.
	ExtIf string
	// Runner runs the FreeBSD commands of a jails node (sys.Exec when
	// nil); tests give a fake.
	Runner sys.Runner
	// IngressListen and IngressTLSListen, when set, run the node's HTTP
	// proxy for Routes (5.8) there.
	IngressListen, IngressTLSListen string
	Logger                          *slog.Logger
}

// Node is a running single-node cluster.
type Node struct {
	Name    string
	Client  *client.Client // as the cluster admin
	Images  *image.Images
	Store   *store.Store
	Admin   string // the admin credentials file
	API     string
	DNS     string
	Runtime jail.Runtime
	// VIPOctet places VIPs on this host (LocalAddr) on the process
	// platform.
	VIPOctet byte
	// Platform is what pods run on; ExtIf, on jails, the interface
	// published ports are redirected from.
	Platform string
	ExtIf    string
	// Ingress lists where the HTTP proxy for Routes listens (none when
	// off).
	Ingress []string
}

func (o *Options) defaults() error {
	if o.DataDir == "" {
		o.DataDir = ".legion"
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	o.DataDir = abs
	if o.RunDir == "" {
		base := os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
		// One per data directory: task uids repeat across clusters.
		h := fnv.New32a()
		h.Write([]byte(o.DataDir))
		o.RunDir = filepath.Join(base, fmt.Sprintf("legion-%d-%08x", os.Getuid(), h.Sum32()))
	}
	if rel, err := filepath.Rel(o.DataDir, o.RunDir); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("run directory %s is under the data directory %s: secrets would reach the disk", o.RunDir, o.DataDir)
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:7470"
	}
	if o.DNSListen == "" {
		o.DNSListen = "127.0.0.1:5353"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.platformDefaults()
	if o.PodOctet == 0 {
		o.PodOctet = 200
	}
	if o.VIPOctet == 0 {
		o.VIPOctet = 201
	}
	return nil
}

// NodeName is this host's name as a DNS label.
func NodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	h = strings.ToLower(strings.SplitN(h, ".", 2)[0])
	var b strings.Builder
	for _, r := range h {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" || legion.ValidName(s) != nil {
		return "node"
	}
	return s
}

// Run starts a one-node cluster (manager and agent in this process, the
// process runtime and loopback network), initialising it on first use,
// calls ready once it serves, and runs until ctx ends.
func Run(ctx context.Context, o Options, ready func(*Node) error) error {
	if err := o.defaults(); err != nil {
		return err
	}
	log := o.Logger
	for _, d := range []string{o.DataDir, o.RunDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	srv, err := server.New(server.Config{DataDir: filepath.Join(o.DataDir, "manager"), Listen: o.Listen, Logger: log})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() { srv.Stop(); <-served }()

	admin := filepath.Join(o.DataDir, "manager", server.AdminFile)
	if _, err := os.Stat(admin); errors.Is(err, os.ErrNotExist) {
		bare, err := client.New(client.Options{Server: srv.Addr()})
		if err != nil {
			return err
		}
		_, err = bare.Init(ctx)
		bare.Close()
		if err != nil {
			return fmt.Errorf("initialising the cluster: %w", err)
		}
		log.Info("initialised a new cluster", "admin", admin)
	}
	cl, err := client.New(client.Options{Server: srv.Addr(), CredentialsFile: admin})
	if err != nil {
		return err
	}
	defer cl.Close()
	st := srv.Store()
	if st == nil {
		return errors.New("the daemon is not a manager of its cluster")
	}
	for deadline := time.Now().Add(30 * time.Second); !st.IsLeader(); {
		if time.Now().After(deadline) {
			return errors.New("no leader after 30 s")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	p, err := openPlatform(ctx, o, exe, log)
	if err != nil {
		return err
	}
	defer func() { p.close() }()
	if err := p.wireGuardKey(ctx, o, filepath.Join(o.DataDir, "manager", server.PKIDir)); err != nil {
		return err
	}
	name := NodeName()
	subnet, err := registerNode(ctx, st, name, p)
	if err != nil {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	zone := filepath.Join(o.RunDir, "resolver", "zone.json")
	if err := resolver.WriteZone(zone, resolver.Zone{Records: map[string]resolver.Record{}}); err != nil {
		return err
	}
	if err := p.openNetwork(ctx, o, networkConfig{subnet: subnet, node: name, zone: zone,
		keyDir: filepath.Join(o.DataDir, "manager", server.PKIDir)}, log); err != nil {
		return err
	}
	images, rt := p.images, p.runtime
	o.DNSListen = p.dnsListen
	local := &Local{Store: st, Node: name}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	run := func(what string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil && runCtx.Err() == nil {
				log.Error(what+" stopped", "err", err)
			}
		}()
	}
	run("heartbeat", func(ctx context.Context) error {
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		sampler := newUsageSampler(rt, name)
		for {
			local.Heartbeat(name, time.Now())
			local.ReportUsage(sampler.Usage())
			select {
			case <-ctx.Done():
				return nil
			case <-tk.C:
			}
		}
	})
	run("leader", func(ctx context.Context) error {
		RunWhileLeader(ctx, st, time.Second, log, LeaderTasks(st, local, resolveWith(images), log)...)
		return nil
	})
	dnsAddr, err := serveResolver(runCtx, o, exe, zone, run, log)
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	a := &agent.Agent{Node: name, Manager: local, Runtime: rt, Images: images, Network: p.network,
		DataDir: o.DataDir, RunDir: o.RunDir, Logger: log, Endpoints: p.endpoints, TaskDirs: p.taskDirs}
	var ingressAddrs []string
	if o.IngressListen != "" || o.IngressTLSListen != "" {
		g := NewIngress(log)
		if ingressAddrs, err = g.Serve(runCtx, o.IngressListen, o.IngressTLSListen, run); err != nil {
			stop()
			wg.Wait()
			return err
		}
		a.Routes = g.Apply
	}
	run("agent", a.Run)
	sc, err := sessions.New(sessions.Config{Managers: func() []string { return []string{srv.Addr()} }, TLS: srv.Credentials().ClientConfig(),
		Node: name, Logs: rt.Logs, Exec: rt.Exec, PodIP: a.PodIP, DataDir: o.DataDir, Logger: log})
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	run("sessions", sc.Run)

	n := &Node{Name: name, Client: cl, Images: images, Store: st, Admin: admin, API: srv.Addr(), DNS: dnsAddr, Runtime: rt, VIPOctet: o.VIPOctet,
		Platform: p.kind, Ingress: ingressAddrs}
	if nw, ok := p.network.(*PFNetwork); ok {
		n.ExtIf = nw.ExtIf
	}
	var result error
	if ready != nil {
		if err := ready(n); err != nil {
			result = err
			stop()
		}
	}
	<-runCtx.Done()
	stop()
	wg.Wait()
	if o.RemovePods {
		removePods(context.Background(), p, name, o.RunDir, log)
		os.RemoveAll(o.RunDir) // the zone with it, and so the resolver stops
	}
	rt.Wait()
	return result
}

// registerNode writes the node's object with what it offers, keeping an
// operator's spec (availability, taints, labels) when it exists, and
// reserves its pod subnet (after the Node exists, as the dispatcher does),
// recorded in its status.
func registerNode(ctx context.Context, st *store.Store, name string, p *platform) (int, error) {
	status := nodeStatus(name, p)
	now := time.Now()
	status.LastHeartbeat = &now
	o, _, err := st.Get(legion.KindNode, "", name)
	var node *legion.Node
	switch {
	case errors.Is(err, store.ErrNotFound):
		n, _ := legion.New(legion.KindNode)
		n.GetMetadata().Name = name
		if err := legion.Admit(n); err != nil {
			return 0, err
		}
		node = n.(*legion.Node)
		node.Spec.Role = legion.RoleManager
		node.Status = status
		if _, _, err = st.Put(ctx, node, store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}}); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	default:
		node = o.(*legion.Node)
		status.PodCIDR = node.Status.PodCIDR
		node.Status = status
		if _, err = st.PutStatus(ctx, node, store.Precondition{Version: node.Metadata.Version}); err != nil {
			return 0, err
		}
	}
	subnet, err := dispatcher.ReserveSubnet(ctx, st, name)
	if err != nil {
		return 0, err
	}
	if cidr := netbsd.NodeSubnet(subnet).String(); node.Status.PodCIDR != cidr {
		o, _, err := st.Get(legion.KindNode, "", name)
		if err != nil {
			return 0, err
		}
		node = o.(*legion.Node)
		node.Status.PodCIDR = cidr
		if _, err := st.PutStatus(ctx, node, store.Precondition{Version: node.Metadata.Version}); err != nil {
			return 0, err
		}
	}
	return subnet, nil
}

func memoryBytes() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		var kb int64
		for _, line := range strings.Split(string(data), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 4 << 30
}

// removePods stops and removes every container of the node, with their
// roots, the pods' network and their tasks' file systems.
func removePods(ctx context.Context, p *platform, node, runDir string, log *slog.Logger) {
	rt := p.runtime
	cs, err := rt.List(ctx, map[string]string{agent.LabelNode: node})
	if err != nil {
		return
	}
	for _, c := range cs {
		if !c.Infra {
			rt.Stop(ctx, c.ID, -1)
		}
	}
	for _, c := range cs {
		if c.Infra {
			t := &legion.Task{}
			t.Metadata.UID = c.ID
			if err := p.network.Detach(ctx, t); err != nil {
				log.Warn("removing pod network", "id", c.ID, "err", err)
			}
			if p.taskDirs != nil {
				if err := p.taskDirs.UnmountTaskDir(ctx, filepath.Join(runDir, "tasks", c.ID)); err != nil {
					log.Warn("unmounting the task's files", "id", c.ID, "err", err)
				}
			}
		}
	}
	for _, c := range cs {
		if err := rt.Remove(ctx, c.ID); err != nil {
			log.Warn("removing container", "id", c.ID, "err", err)
		}
		if !c.Infra {
			if err := p.images.RemoveRoot(ctx, c.ID); err != nil {
				log.Debug("removing container root", "id", c.ID, "err", err)
			}
		}
	}
}

// LeaderTasks is the work a leading manager does: the controller loop,
// the VIP allocator and the image resolver.
func LeaderTasks(st *store.Store, signals controller.Signals, resolve controller.ResolveFunc, log *slog.Logger) []LeaderTask {
	return []LeaderTask{
		{Name: "controller", Run: func(ctx context.Context) error {
			return (&controller.Loop{Store: st, Signals: signals, Logger: log, LeaderSince: LeaderSince(ctx)}).Run(ctx)
		}},
		{Name: "VIP allocator", Run: func(ctx context.Context) error { return RunVIPAllocator(ctx, st, log) }},
		{Name: "image resolver", Run: (&controller.ImageResolver{Store: st, Resolve: resolve, Check: checkWith(st, &image.Registry{}), Logger: log}).Run},
	}
}

// resolveWith resolves tags through the node's registry client, with the
// login a pod's pull secrets hold for the image's registry.
func resolveWith(images *image.Images) controller.ResolveFunc {
	return func(ctx context.Context, ref string, configs [][]byte) (string, error) {
		r, err := image.ParseReference(ref)
		if err != nil {
			return "", err
		}
		return images.Resolve(ctx, ref, loginFor(r, configs))
	}
}

// serveResolver starts the node resolver, as its own process or in this
// one, and returns the address it answers at.
func serveResolver(ctx context.Context, o Options, exe, zone string, run func(string, func(context.Context) error), log *slog.Logger) (string, error) {
	if o.ResolverProcess {
		return startResolverProcess(ctx, exe, o.DNSListen, zone, o.DataDir, log)
	}
	pc, tl, err := resolver.Listen(o.DNSListen)
	if err != nil {
		return "", fmt.Errorf("node resolver: %w", err)
	}
	ups := o.Upstreams
	if ups == nil {
		ups, _ = resolver.HostUpstreams("/etc/resolv.conf", o.DNSListen)
	}
	run("node resolver", func(ctx context.Context) error {
		return (&resolver.Server{ZoneFile: zone, Upstreams: ups, Logger: log}).Serve(ctx, pc, tl)
	})
	return pc.LocalAddr().String(), nil
}
