package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
	agentmetrics "github.com/legionbsd/legion/internal/agent/metrics"
	"github.com/legionbsd/legion/internal/agent/sessionsclient"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// credentialsPoll is how often an agent looks whether its daemon has
// joined a cluster yet (init or join may come after the start).
const credentialsPoll = 500 * time.Millisecond

// RunAgent is the node side of `legion daemon` and `legion up`: once the
// daemon belongs to a cluster (after init or join) it runs the agent,
// which reaches the managers through the dispatcher like any other
// node's, on a manager through its own port first. The leader's work is
// the manager's (cluster/manager), not the agent's. It returns when ctx
// ends; pods keep running for the next daemon to adopt unless
// o.RemovePods.
func RunAgent(ctx context.Context, srv *server.Server, o Options, managers []string) error {
	return runAgent(ctx, srv, o, agentConfig{managers: managers})
}

// agentConfig is what differs between the daemon's agent and up's.
type agentConfig struct {
	managers []string
	// keyDir holds the node's WireGuard key; empty: the data directory's
	// pki directory on a manager, the data directory on a worker.
	keyDir string
	// needResolver makes a node resolver that does not start an error
	// rather than a warning.
	needResolver bool
	// started is called once the node is registered and its agent runs;
	// an error from it ends the run with that error.
	started func(*startedNode) error
}

// startedNode is what a running agent tells the one who started it.
type startedNode struct {
	name     string
	platform *platform
	dns      string   // where the node resolver answers
	ingress  []string // where the HTTP proxy listens
}

func runAgent(ctx context.Context, srv *server.Server, o Options, ac agentConfig) (retErr error) {
	if err := o.defaults(); err != nil {
		return err
	}
	log := o.Logger
	// Before init or join: a host that cannot be a node never joins (D7).
	if err := checkJailsHost(ctx, o, log); err != nil {
		return err
	}
	// Init and join publish the credentials before a manager's store
	// opens: wait for the role too, or a manager starting up looks like
	// a worker that knows no manager.
	for srv.Credentials() == nil || srv.Role() != server.RoleManager && srv.Role() != server.RoleWorker {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(credentialsPoll):
		}
	}
	creds := srv.Credentials()
	name := srv.NodeID()
	managing := srv.Store() != nil
	managers := ac.managers
	if managing {
		managers = append([]string{srv.Advertise()}, managers...)
	}
	if len(managers) == 0 {
		managers = srv.JoinedThrough()
	}
	if len(managers) == 0 {
		return fmt.Errorf("this node is a worker that knows no manager: give --manager ADDR so its agent can reach the cluster")
	}
	if o.RemovePods {
		// legion up's run directory goes with it on every way out: also
		// when it is stopped before its node registered (a cluster that
		// elects no leader), which the pods' removal below never reaches.
		defer os.RemoveAll(o.RunDir)
	}
	for _, d := range []string{o.DataDir, o.RunDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
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
	images, rt := p.images, p.runtime
	keyDir := ac.keyDir
	if keyDir == "" {
		keyDir = o.DataDir
		if managing {
			// pki, or the run directory while autolock keeps it sealed.
			if keyDir, err = srv.WireGuardKeyDir(o.RunDir); err != nil {
				return err
			}
		}
	}
	if err := p.wireGuardKey(ctx, o, keyDir); err != nil {
		return err
	}
	sess, err := dispatcherclient.New(dispatcherclient.Config{Managers: managers, TLS: creds.ClientConfig(), Logger: log,
		Usage:  newUsageSampler(rt, name).Usage,
		Status: func() legion.NodeStatus { return nodeStatus(NodeName(), p, o) }})
	if err != nil {
		return err
	}
	defer sess.Close()
	p.statusChanged = sess.StatusChanged
	srv.UseManagers(sess.Managers)
	if err := sess.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-sess.Removed():
			// Removed while this daemon was down: the pods it left run
			// tasks the managers gave to other nodes since.
			if err := removePods(context.Background(), p, name, o.RunDir, log); err != nil {
				return fmt.Errorf("%w; the pods this node still ran, whose tasks run on other nodes now, were to be stopped, but %v; %s", sess.RemovedErr(), err, rejoin(o.DataDir))
			}
			return fmt.Errorf("%w; the pods this node still ran were stopped, as their tasks run on other nodes now; %s", sess.RemovedErr(), rejoin(o.DataDir))
		default:
		}
		return err
	}
	if sess.PodCIDR() == "" && o.Platform == PlatformJails {
		return errors.New("the managers gave this node no pod subnet")
	}
	plan, subnet, err := nodePlan(sess.PodCIDR(), sess.ServiceCIDR())
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
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
	// Whatever was started is stopped and waited for on every way out;
	// the pods go too when asked, or when the node was removed.
	removeAll := o.RemovePods
	defer func() {
		stop()
		wg.Wait()
		if removeAll {
			if rerr := removePods(context.Background(), p, name, o.RunDir, log); rerr != nil && retErr == nil {
				retErr = rerr
			}
			os.RemoveAll(o.RunDir) // the zone with it, and so the resolver stops
		}
		rt.Wait()
	}()
	zone := filepath.Join(o.RunDir, "resolver", "zone.json")
	if err := resolver.WriteZone(zone, resolver.Zone{Records: map[string]resolver.Record{}}); err != nil {
		return err
	}
	if err := p.openNetwork(ctx, o, networkConfig{plan: plan, subnet: subnet, node: name, zone: zone, keyDir: keyDir}, log); err != nil {
		return err
	}
	if p.kind == PlatformJails || p.netns != nil {
		o.DNSListen = p.dnsListen // the gateway, where pods' resolv.conf points
	} else if o.DNSListen == "" {
		o.DNSListen = p.dnsListen // the gateway of the node's slice of 127/8
	}
	var dnsAddr string
	if o.DNSListen != "" && o.DNSListen != NoResolver {
		if dnsAddr, err = serveResolver(runCtx, o, exe, zone, run, log); err != nil {
			if ac.needResolver {
				return err
			}
			log.Warn("node resolver not started", "err", err)
		}
	}
	a := &agent.Agent{Node: name, Manager: sess, Runtime: rt, Images: images,
		Network: p.network, DataDir: o.DataDir, RunDir: o.RunDir, Logger: log, Endpoints: p.endpoints, TaskDirs: p.taskDirs, Peers: p.peers,
		Volumes: p.volumes, Attacher: p.attacher, Platform: p.nodePlatform(), Memory: p.memory, EvictionMemoryAvailable: o.EvictionMemoryAvailable,
		PressureChanged: func(on bool) {
			p.memoryPressure.Store(on)
			if p.statusChanged != nil {
				p.statusChanged()
			}
		}}
	var ingressAddrs []string
	if o.IngressListen != "" || o.IngressTLSListen != "" {
		g := NewIngress(log)
		for _, c := range o.IngressProxyProtocol {
			pf, err := netip.ParsePrefix(c)
			if err != nil {
				return fmt.Errorf("--ingress-proxy-protocol %q: want the load balancers' CIDR", c)
			}
			g.Proxy.AcceptProxyProtocol = append(g.Proxy.AcceptProxyProtocol, pf.Masked())
		}
		if ingressAddrs, err = g.Serve(runCtx, o.IngressListen, o.IngressTLSListen, run); err != nil {
			return err
		}
		log.Info("ingress proxy listening", "addrs", ingressAddrs)
		a.Routes = g.Apply
	}
	sc, err := sessionsclient.New(sessionsclient.Config{Managers: sess.Managers, TLS: creds.ClientConfig(), Logs: rt.Logs, Exec: rt.Exec, PodIP: a.PodIP,
		DataDir: o.DataDir, Logger: log, Volumes: a})
	if err != nil {
		return err
	}
	if o.Metrics != nil {
		if err := agentmetrics.Register(o.Metrics, agentmetrics.Source{Node: name, Runtime: rt, Tasks: a.Tasks,
			Images: images.List, Sessions: sc.Sessions, NodeMemory: a.NodeMemory, Evictions: a.Evictions}); err != nil {
			return fmt.Errorf("registering the agent's metrics: %w", err)
		}
	}
	run("sessions", sc.Run)
	run("agent", a.Run)
	if p.oom != nil {
		run("memory killer", func(ctx context.Context) error { p.oom.Run(ctx); return nil })
	}
	if ac.started != nil {
		if err := ac.started(&startedNode{name: name, platform: p, dns: dnsAddr, ingress: ingressAddrs}); err != nil {
			return err
		}
	}
	select {
	case <-runCtx.Done():
		return nil
	case <-sess.Removed():
		// The managers gave this node's tasks to other nodes: what runs
		// here would run twice, so it stops, and the daemon with it, as
		// nothing here will be heard again (Docker's node leaves swarm
		// mode). Volumes' data stays.
		removeAll = true
		return fmt.Errorf("%w; this node's pods were stopped, as their tasks run on other nodes now; %s", sess.RemovedErr(), rejoin(o.DataDir))
	}
}

// rejoin says how a removed node joins again: its data directory's pki/
// holds the certificates the cluster refuses, and a daemon started with
// them ends at once; without them it waits for a join, keeping the node's
// id, images and volumes' data.
func rejoin(dataDir string) string {
	return "to join again, move " + filepath.Join(dataDir, "pki") + " aside (the certificates refused), start the daemon and run legion join with a token"
}

// nodePlatform is what this node runs: its OS and architecture, and
// whether it runs Linux images (p.linux).
func (p *platform) nodePlatform() legion.Platform {
	return legion.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Linux: p.linux}
}

// nodeStatus is what this node reports of itself: its platform, on a
// jails node without rctl that it takes no limits, and where it serves
// Routes.
func nodeStatus(hostname string, p *platform, o Options) legion.NodeStatus {
	cpu := legion.CPU(runtime.NumCPU() * 1000)
	mem := legion.Bytes(memoryBytes())
	pl := p.nodePlatform()
	pl.NoLimits = p.noLimits
	st := legion.NodeStatus{State: legion.NodeReady, Hostname: hostname,
		Platform:  pl,
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: cpu, Memory: mem}, Allocatable: legion.ResourceRequests{CPU: cpu, Memory: mem}},
		Version:   "dev", ImagePins: true}
	if p.wgKey != "" {
		st.WireGuard = &legion.WireGuard{PublicKey: p.wgKey}
	}
	st.Runtime, st.ZFSRoot = p.kind, p.zfsRoot
	if o.IngressListen != "" || o.IngressTLSListen != "" {
		st.Ingress = &legion.NodeIngress{HTTP: o.IngressListen, HTTPS: o.IngressTLSListen}
	}
	if p.publishErrors != nil {
		st.PublishErrors = p.publishErrors()
	}
	st.MemoryPressure = p.memoryPressure.Load()
	return st
}

// serveResolver starts the node resolver, as its own process or in this
// one, and returns the address it answers at.
func serveResolver(ctx context.Context, o Options, exe, zone string, run func(string, func(context.Context) error), log *slog.Logger) (string, error) {
	if o.ResolverProcess {
		return StartResolverProcess(ctx, exe, o.DNSListen, zone, o.DataDir, log)
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
