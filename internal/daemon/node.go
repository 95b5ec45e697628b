package daemon

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/manager"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a single-node cluster run in the foreground.
type Options struct {
	DataDir string // default ./.legion
	// RunDir holds task secrets and the resolver's zone; it must not be
	// under DataDir (default: a directory of the user's in /dev/shm where
	// it exists, else the system's temporary directory).
	RunDir string
	Listen string // the API, default 127.0.0.1:7470
	// DNSListen is where the node resolver answers on the process
	// platform's loopback network: by default the gateway of the node's
	// pod /24 in 127/8, on port 53 when this process may bind it, else on
	// a port chosen there; NoResolver starts none. Jails and pod
	// namespaces always serve it on the gateway, port 53.
	DNSListen string
	// Upstreams for names outside the cluster; the host's when nil.
	Upstreams []string
	// PodCIDR and ServiceCIDR are the ranges Run gives a cluster it
	// initialises (IPv4 /16s); empty ones are chosen (Ranges). On the
	// loopback network pod 10.X.n.h is 127.X.n.h and VIP 10.Y.a.b is
	// 127.Y.a.b, so clusters with other ranges share a host.
	PodCIDR, ServiceCIDR string
	// ResolverProcess runs the node resolver as a process of its own
	// (`legion node-resolver`, which outlives daemon restarts) rather than
	// in this one; the binary must be legion.
	ResolverProcess bool
	// RemovePods removes the node's pods when Run returns (legion up);
	// otherwise they keep running for the next daemon to adopt.
	RemovePods bool
	// UnlockKey opens the manager's sealed keys when autolock is on (Run:
	// legion up). Without it, Run calls Locked with the manager's address
	// and waits for legion unlock.
	UnlockKey string
	Locked    func(api string)
	// Platform is what pods run on: PlatformJails or PlatformProcess
	// (DefaultPlatform when empty).
	Platform string
	// PodNetwork is a process node's pod network: PodNetworkLoopback (the
	// default when empty), PodNetworkNetNS or PodNetworkAuto.
	PodNetwork string
	// ZFSRoot is the dataset of images and container roots on a jails
	// node (DefaultZFSRoot when empty).
	ZFSRoot string
	// VolumePlugins is the directory of volume plugin executables
	// (attach.DefaultPluginDir when empty).
	VolumePlugins string
	// ExtIf is the interface published ports are redirected from on a
	// jails node; the default route's when empty.
	ExtIf string
	// Linux has a jails node run Linux images too, through FreeBSD's
	// Linux ABI (--linux, 6.6); a process node on Linux runs them anyway
	// and one elsewhere cannot (see linuxImages).
	Linux bool
	// PFMain lets a jails node load a main pf ruleset of just the calls of
	// Legion's anchors when the host's is empty (--pf-main).
	PFMain bool
	// Runner runs the FreeBSD commands of a jails node (sys.Exec when
	// nil); tests give a fake.
	Runner sys.Runner
	// kernelVM is where a jails node reads its containers' memory maps
	// (jail.HostVM when nil); tests give recorded ones.
	kernelVM jail.VMSource
	// launch starts a jails node's supervisors (jail.Config.Launch; the
	// runtime's own when nil). Tests whose Runner is a fake start none.
	launch func(shim, dir string, lock *os.File) (code int, reason string)
	// IngressListen and IngressTLSListen, when set, run the node's HTTP
	// proxy for Routes (5.8) there.
	IngressListen, IngressTLSListen string
	// IngressProxyProtocol are the load balancers in front of the ingress
	// (CIDRs) that open each connection with a PROXY protocol header
	// (--ingress-proxy-protocol); none when empty.
	IngressProxyProtocol []string
	Logger               *slog.Logger
	// MetricsListen, when set, has Run serve Prometheus metrics at
	// /metrics there (its manager's and its agent's).
	MetricsListen string
	// Metrics, when set, gets the agent's metrics (the daemon's
	// MetricsServer registry).
	Metrics prometheus.Registerer
	// EvictionMemoryAvailable is the node's available memory, in bytes,
	// below which its agent evicts tasks (--eviction-memory-available):
	// the agent's default (100Mi) when zero, never when negative.
	EvictionMemoryAvailable int64
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
	// platform: the second octet of the cluster's service range.
	VIPOctet byte
	// PodCIDR and ServiceCIDR are the cluster's ranges.
	PodCIDR, ServiceCIDR string
	// Platform is what pods run on; ExtIf, on jails, the interface
	// published ports are redirected from.
	Platform string
	ExtIf    string
	// PodNetwork is a process node's pod network (PodNetworkLoopback or
	// PodNetworkNetNS); empty on jails.
	PodNetwork string
	// Ingress lists where the HTTP proxy for Routes listens (none when
	// off).
	Ingress []string
	// PublishError says why a published port is not served on this
	// host (nil when it is); nil on jails, where pf redirects them.
	PublishError func(port int) error
	// WasLocked: the manager started with its keys sealed (autolock) and
	// was unlocked.
	WasLocked bool
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.platformDefaults()
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

// waitUnlocked returns once the manager, started with sealed keys
// (autolock), is unlocked: with o.UnlockKey, else by legion unlock from
// another terminal, which o.Locked says how to run; at once when it is
// not locked, and when ctx ends.
func waitUnlocked(ctx context.Context, srv *server.Server, o Options) error {
	if srv.Role() != server.RoleLocked {
		return nil
	}
	if o.UnlockKey != "" {
		bare, err := client.New(client.Options{Server: srv.Addr()})
		if err != nil {
			return err
		}
		_, err = bare.Unlock(ctx, o.UnlockKey)
		bare.Close()
		if err != nil {
			return fmt.Errorf("unlocking the manager: %w", err)
		}
	} else if o.Locked != nil {
		o.Locked(srv.Addr())
	}
	for srv.Role() == server.RoleLocked {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(readyPoll):
		}
	}
	return nil
}

// readyPoll is how often up looks whether its node is ready for tasks.
const readyPoll = 50 * time.Millisecond

// UpManagerDir is where legion up, given dataDir, keeps its manager's
// data directory (its node-id, pki and store).
func UpManagerDir(dataDir string) string { return filepath.Join(dataDir, "manager") }

// Run is `legion up`: a one-node cluster in this process, initialising it
// on first use. The manager (cluster/manager) serves on o.Listen and the
// node's agent registers with it over loopback, through its dispatcher,
// with the manager's own node certificate, as `legion daemon` does. Once
// the node is registered, its agent runs and the leader has it ready for
// tasks, ready is called; Run returns when ctx ends (removing the pods
// when o.RemovePods) or with ready's error.
func Run(ctx context.Context, o Options, ready func(*Node) error) error {
	if err := o.defaults(); err != nil {
		return err
	}
	log := o.Logger
	managerDir := UpManagerDir(o.DataDir)
	ranges, release := Ranges(o)
	defer release()
	sc := server.Config{DataDir: managerDir, Listen: o.Listen, Logger: log, Ranges: ranges}
	if o.MetricsListen != "" {
		ms, err := ServeMetrics(o.MetricsListen, log)
		if err != nil {
			return err
		}
		defer ms.Close()
		sc.Metrics, o.Metrics = ms.Registry, ms.Registry
	}
	m, err := manager.Start(manager.Config{Server: sc})
	if err != nil {
		return err
	}
	defer m.Stop()
	srv := m.Server()

	wasLocked := srv.Role() == server.RoleLocked
	if err := waitUnlocked(ctx, srv, o); err != nil || ctx.Err() != nil {
		return err
	}
	admin := filepath.Join(managerDir, server.AdminFile)
	if _, err := os.Stat(admin); errors.Is(err, os.ErrNotExist) {
		bare, err := client.New(client.Options{Server: srv.Addr()})
		if err != nil {
			return err
		}
		_, err = bare.InitRanges(ctx, o.PodCIDR, o.ServiceCIDR)
		bare.Close()
		if err != nil {
			return fmt.Errorf("initialising the cluster: %w", err)
		}
		log.Info("initialised a new cluster", "admin", admin)
	}
	st := srv.Store()
	if st == nil {
		return errors.New("the daemon is not a manager of its cluster")
	}
	cl, err := client.New(client.Options{Server: srv.Addr(), CredentialsFile: admin})
	if err != nil {
		return err
	}
	defer cl.Close()
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	started := func(sn *startedNode) error {
		if !waitNodeReady(agentCtx, st, sn.name) || ready == nil {
			return nil
		}
		p := sn.platform
		n := &Node{Name: sn.name, Client: cl, Images: p.images, Store: st, Admin: admin, API: srv.Addr(), DNS: sn.dns,
			Runtime: p.runtime, VIPOctet: p.vipOctet, Platform: p.kind, Ingress: sn.ingress, PublishError: p.publishError, WasLocked: wasLocked}
		if p.kind == PlatformProcess {
			n.PodNetwork = PodNetworkLoopback
			if p.netns != nil {
				n.PodNetwork = PodNetworkNetNS
			}
		}
		if plan, err := netplan.Read(st); err == nil {
			n.PodCIDR, n.ServiceCIDR = plan.Pod.String(), plan.Service.String()
		}
		if nw, ok := p.network.(*PFNetwork); ok {
			n.ExtIf = nw.ExtIf
		}
		return ready(n)
	}
	return runAgent(agentCtx, srv, o, agentConfig{keyDir: filepath.Join(managerDir, server.PKIDir), needResolver: true, started: started})
}

// waitNodeReady waits until the leader has seen the node's heartbeats and
// marked it ready, so tasks can be placed on it; false when ctx ended
// first.
func waitNodeReady(ctx context.Context, st *store.Store, name string) bool {
	tk := time.NewTicker(readyPoll)
	defer tk.Stop()
	for {
		o, _, err := st.Get(legion.KindNode, "", name)
		if err == nil && o.(*legion.Node).Status.State == legion.NodeReady {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tk.C:
		}
	}
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
// roots, the pods' network and their tasks' file systems. Before the
// network is open (a node told at registration that it was removed) a
// jail's interface is taken off the host alone; a process node's next
// network removes what pods no longer there left of it. It says which
// containers are still there after it, from the runtime's own list, so
// that no caller reports the pods gone on the strength of having asked.
func removePods(ctx context.Context, p *platform, node, runDir string, log *slog.Logger) error {
	rt := p.runtime
	selector := map[string]string{agent.LabelNode: node}
	cs, err := rt.List(ctx, selector)
	if err != nil {
		return fmt.Errorf("listing the node's containers to remove them: %w", err)
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
			switch {
			case p.network != nil:
				if err := p.network.Detach(ctx, t); err != nil {
					log.Warn("removing pod network", "id", c.ID, "err", err)
				}
			case p.leavePod != nil:
				if err := p.leavePod(ctx, c.ID); err != nil {
					log.Warn("removing the pod's interface", "id", c.ID, "err", err)
				}
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
	if p.dropNetwork != nil {
		if err := p.dropNetwork(ctx); err != nil {
			log.Warn("removing the pod network", "err", err)
		}
	}
	left, err := rt.List(ctx, selector)
	if err != nil {
		return fmt.Errorf("listing the node's containers after removing them: %w", err)
	}
	if len(left) > 0 {
		ids := make([]string, len(left))
		for i, c := range left {
			ids[i] = c.ID
		}
		slices.Sort(ids)
		return fmt.Errorf("containers of the node still there after they were stopped and removed (the node's log says why): %s",
			strings.Join(ids, ", "))
	}
	return nil
}
