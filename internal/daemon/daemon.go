package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/session"
	"github.com/legionbsd/legion/internal/agent/sessions"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// RunAgent is the node side of `legion daemon`: once the daemon belongs to
// a cluster (after init or join) it runs the agent, which reaches the
// managers through the dispatcher like any other node's, and on a manager
// the leader's controllers and the endpoints. It returns when ctx ends;
// pods keep running for the next daemon to adopt.
func RunAgent(ctx context.Context, srv *server.Server, o Options, managers []string) error {
	if err := o.defaults(); err != nil {
		return err
	}
	log := o.Logger
	for srv.Credentials() == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
	creds := srv.Credentials()
	st := srv.Store()
	if st != nil {
		managers = append([]string{srv.Advertise()}, managers...)
	}
	if len(managers) == 0 {
		managers = srv.JoinedThrough()
	}
	if len(managers) == 0 {
		return fmt.Errorf("this node is a worker that knows no manager: give --manager ADDR so its agent can reach the cluster")
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
	keyDir := o.DataDir
	if st != nil {
		keyDir = filepath.Join(o.DataDir, server.PKIDir)
	}
	if err := p.wireGuardKey(ctx, o, keyDir); err != nil {
		return err
	}
	sess, err := session.New(session.Config{Managers: managers, TLS: creds.ClientConfig(), Logger: log,
		Usage:  newUsageSampler(rt, srv.NodeID()).Usage,
		Status: func() legion.NodeStatus { return nodeStatus(NodeName(), p) }})
	if err != nil {
		return err
	}
	defer sess.Close()
	srv.UseManagers(sess.Managers)
	if err := sess.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	subnet := 1 // a manager from before subnets gives none
	if cidr := sess.PodCIDR(); cidr != "" || o.Platform == PlatformJails {
		if subnet, err = subnetOf(cidr); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	run := func(what string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				log.Error(what+" stopped", "err", err)
			}
		}()
	}
	zone := filepath.Join(o.RunDir, "resolver", "zone.json")
	if err := resolver.WriteZone(zone, resolver.Zone{Records: map[string]resolver.Record{}}); err != nil {
		return err
	}
	if err := p.openNetwork(ctx, o, networkConfig{subnet: subnet, node: srv.NodeID(), zone: zone, keyDir: keyDir}, log); err != nil {
		return err
	}
	if p.kind == PlatformJails {
		o.DNSListen = p.dnsListen
	}
	if st != nil {
		run("leader", func(ctx context.Context) error {
			RunWhileLeader(ctx, st, time.Second, log, LeaderTasks(st, srv.Dispatcher(), resolveWith(images), log)...)
			return nil
		})
	}
	if o.DNSListen != "" {
		if _, err := serveResolver(ctx, o, exe, zone, run, log); err != nil {
			log.Warn("node resolver not started", "err", err)
		}
	}
	a := &agent.Agent{Node: srv.NodeID(), Manager: sess, Runtime: rt, Images: images,
		Network: p.network, DataDir: o.DataDir, RunDir: o.RunDir, Logger: log, Endpoints: p.endpoints, TaskDirs: p.taskDirs, Peers: p.peers}
	if o.IngressListen != "" || o.IngressTLSListen != "" {
		g := NewIngress(log)
		addrs, err := g.Serve(ctx, o.IngressListen, o.IngressTLSListen, run)
		if err != nil {
			return err
		}
		log.Info("ingress proxy listening", "addrs", addrs)
		a.Routes = g.Apply
	}
	sc, err := sessions.New(sessions.Config{Managers: sess.Managers, TLS: creds.ClientConfig(), Logs: rt.Logs, Exec: rt.Exec, PodIP: a.PodIP,
		DataDir: o.DataDir, Logger: log})
	if err != nil {
		return err
	}
	run("sessions", sc.Run)
	run("agent", a.Run)
	wg.Wait()
	rt.Wait()
	return nil
}

// nodeStatus is what this node reports of itself. Linux images run only
// where containers are host processes on Linux; a jails node without rctl
// says it takes no limits.
func nodeStatus(hostname string, p *platform) legion.NodeStatus {
	cpu := legion.CPU(runtime.NumCPU() * 1000)
	mem := legion.Bytes(memoryBytes())
	st := legion.NodeStatus{State: legion.NodeReady, Hostname: hostname,
		Platform: legion.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Linux: runtime.GOOS == "linux" && p.kind == PlatformProcess,
			NoLimits: p.noLimits},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: cpu, Memory: mem}, Allocatable: legion.ResourceRequests{CPU: cpu, Memory: mem}},
		Version:   "dev", ImagePins: true}
	if p.wgKey != "" {
		st.WireGuard = &legion.WireGuard{PublicKey: p.wgKey}
	}
	return st
}
