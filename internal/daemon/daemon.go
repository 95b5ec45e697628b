package daemon

import (
	"context"
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
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/session"
	"github.com/legionbsd/legion/internal/agent/sessions"
	"github.com/legionbsd/legion/jail/process"
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
		return fmt.Errorf("this node is a worker: give --manager ADDR so its agent can reach the cluster")
	}
	log.Warn("the agent runs containers as host processes on the loopback network: nothing is isolated")
	for _, d := range []string{o.DataDir, o.RunDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	images, rt, exe, err := openNode(o.DataDir, log)
	if err != nil {
		return err
	}
	defer images.Close()
	sess, err := session.New(session.Config{Managers: managers, TLS: creds.ClientConfig(), Logger: log,
		Usage:  newUsageSampler(rt, srv.NodeID()).Usage,
		Status: func() legion.NodeStatus { return nodeStatus(NodeName()) }})
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := sess.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	subnet, err := loopbackSubnet(sess.PodCIDR(), o.PodOctet)
	if err != nil {
		return err
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
	eps := &Endpoints{ZoneFile: zone, Logger: log, VIPOctet: o.VIPOctet}
	defer eps.Close()
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
	sc, err := sessions.New(sessions.Config{Managers: sess.Managers, TLS: creds.ClientConfig(), Logs: rt.Logs, DataDir: o.DataDir, Logger: log})
	if err != nil {
		return err
	}
	run("sessions", sc.Run)
	a := &agent.Agent{Node: srv.NodeID(), Manager: sess, Runtime: rt, Images: images,
		Network: &LoopbackNetwork{Subnet: subnet}, DataDir: o.DataDir, RunDir: o.RunDir, Logger: log, Endpoints: eps.Apply}
	run("agent", a.Run)
	wg.Wait()
	rt.Wait()
	return nil
}

// loopbackSubnet maps the node's pod /24 into 127/8.
func loopbackSubnet(podCIDR string, octet byte) (netip.Prefix, error) {
	if podCIDR == "" {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 1, 0}), 24), nil
	}
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("pod subnet %q: expected an IPv4 /24", podCIDR)
	}
	return netip.PrefixFrom(LocalAddr(p.Addr(), octet), p.Bits()), nil
}

// nodeStatus is what this node reports of itself.
func nodeStatus(hostname string) legion.NodeStatus {
	cpu := legion.CPU(runtime.NumCPU() * 1000)
	mem := legion.Bytes(memoryBytes())
	return legion.NodeStatus{State: legion.NodeReady, Hostname: hostname,
		Platform:  legion.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Linux: runtime.GOOS == "linux"},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: cpu, Memory: mem}, Allocatable: legion.ResourceRequests{CPU: cpu, Memory: mem}},
		Version:   "dev", ImagePins: true}
}

// openNode opens what a node runs containers with: its image store
// (directories under the data directory; the ZFS store is for FreeBSD
// nodes once wired) and the process runtime, whose supervisor is this
// binary.
func openNode(dataDir string, log *slog.Logger) (*image.Images, *process.Runtime, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, "", err
	}
	ds, err := image.NewDirStore(filepath.Join(dataDir, "layers"))
	if err != nil {
		return nil, nil, "", err
	}
	images, err := image.Open(image.Options{DataDir: dataDir, Store: ds, Log: log,
		Platform: image.PlatformRule{Arch: runtime.GOARCH, AllowLinux: runtime.GOOS != "freebsd"}})
	if err != nil {
		return nil, nil, "", err
	}
	rt, err := process.New(process.Config{DataDir: dataDir, Shim: exe, Log: log})
	if err != nil {
		images.Close()
		return nil, nil, "", err
	}
	return images, rt, exe, nil
}
