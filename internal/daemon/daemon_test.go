package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/manager"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/jail/process"
)

// fastTiming is a Raft timing for tests on loopback.
func fastTiming() store.Timing {
	return store.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SnapshotThreshold: 1 << 20, SnapshotInterval: time.Hour, TrailingLogs: 100}
}

// startManager runs a daemon's cluster side (as `legion daemon` does,
// with or without an agent) on a loopback port until the test ends.
func startManager(t testing.TB, dataDir string) *server.Server {
	t.Helper()
	var m *manager.Manager
	t.Cleanup(func() {
		if m != nil {
			if err := m.Stop(); err != nil {
				t.Errorf("manager: %v", err)
			}
		}
	})
	m, err := manager.Start(manager.Config{Server: server.Config{DataDir: dataDir, Listen: "127.0.0.1:0", WriteTimeout: 5 * time.Second,
		Timing: fastTiming()}, LeaderCheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return m.Server()
}

// initCluster makes srv the first manager of a new cluster and returns
// the admin's client.
func initCluster(t testing.TB, srv *server.Server, dataDir string) *client.Client {
	t.Helper()
	bare, err := client.New(client.Options{Server: srv.Addr(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.Init(context.Background())
	bare.Close()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{Server: srv.Addr(), CredentialsFile: filepath.Join(dataDir, server.AdminFile)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// removeAllPods removes the pods a daemon left running for the next one.
func removeAllPods(t testing.TB, dataDir string) {
	rt, err := process.New(process.Config{DataDir: dataDir, Shim: os.Args[0]})
	if err != nil {
		t.Error(err)
		return
	}
	cs, _ := rt.List(context.Background(), nil)
	for _, c := range cs {
		rt.Remove(context.Background(), c.ID)
	}
	rt.Wait()
}

// legion daemon on a manager: after init, its agent registers through the
// dispatcher over mutual TLS, the leader plans, and a job applied through
// the API runs to completion on the node.
func TestDaemonRunsWorkloadsThroughTheDispatcher(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startManager(t, filepath.Join(dir, "data"))
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- RunAgent(ctx, srv, Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run"), PodOctet: 212, VIPOctet: 213, DNSListen: "127.0.0.1:0"}, nil)
	}()
	defer func() {
		cancel()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() { removeAllPods(t, filepath.Join(dir, "data")) })
	cl := initCluster(t, srv, filepath.Join(dir, "data"))
	poll(t, "the node registered", 30*time.Second, func() bool {
		o, err := cl.Get(context.Background(), legion.KindNode, "", srv.NodeID())
		return err == nil && o.(*legion.Node).Status.PodCIDR != ""
	})
	// The image ships with the example; load it as `legion image load` would.
	images, err := OpenImages(Options{DataDir: filepath.Join(dir, "data"), Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	images.Close()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Job
metadata: {name: hello}
spec:
  pod:
    containers:
      - name: say
        image: `+testImage+`
        pullPolicy: never
        args: [-say, hi, -exit, "0"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the job to complete", 60*time.Second, func() bool {
		o, err := cl.Get(context.Background(), legion.KindJob, "default", "hello")
		if err != nil {
			return false
		}
		st := o.(*legion.Job).Status
		if st.State == legion.JobFailed {
			t.Fatalf("the job failed: %s", st.Message)
		}
		return st.State == legion.JobComplete
	})
	// A service's endpoints reach the node with its assignments: its VIP
	// answers on this node's loopback slice.
	objs, err = legion.ParseManifest("t", []byte(webService))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	var vip string
	poll(t, "the service's VIP", 60*time.Second, func() bool {
		o, err := cl.Get(context.Background(), legion.KindService, "default", "web")
		if err != nil {
			return false
		}
		vip = o.(*legion.Service).Status.VIP
		return vip != ""
	})
	local := LocalAddr(netip.MustParseAddr(vip), 213).String()
	poll(t, "an answer through the VIP", 60*time.Second, func() bool {
		resp, err := http.Get("http://" + net.JoinHostPort(local, "80") + "/")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.HasPrefix(string(body), "web-")
	})
}

// A manager run with no agent still leads (13.3): with one worker joined
// through it, a service applied to the manager runs on the worker, and
// the manager, which runs no agent, has no Node.
func TestManagerWithoutAgentSchedulesOntoAWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mdir, wdir := filepath.Join(dir, "manager"), filepath.Join(dir, "worker")
	msrv := startManager(t, mdir)
	cl := initCluster(t, msrv, mdir)
	ctx := context.Background()
	tok, err := cl.Token(ctx, "worker")
	if err != nil {
		t.Fatal(err)
	}
	wsrv := startManager(t, wdir)
	bare, err := client.New(client.Options{Server: wsrv.Addr(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.JoinCluster(ctx, tok, msrv.Addr(), "")
	bare.Close()
	if err != nil {
		t.Fatalf("joining the worker: %v", err)
	}
	t.Cleanup(func() { removeAllPods(t, wdir) })
	actx, cancel := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-agentDone; err != nil {
			t.Errorf("worker agent: %v", err)
		}
	})
	go func() {
		agentDone <- RunAgent(actx, wsrv, Options{DataDir: wdir, RunDir: filepath.Join(dir, "run"), PodOctet: 214, VIPOctet: 215, DNSListen: "127.0.0.1:0"}, nil)
	}()
	images, err := OpenImages(Options{DataDir: wdir, Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	images.Close()
	objs, err := legion.ParseManifest("t", []byte(strings.Replace(webService, "replicas: 3", "replicas: 1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	var task *legion.Task
	poll(t, "a ready task of the service", 60*time.Second, func() bool {
		ts, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: "default"})
		if err != nil {
			return false
		}
		for _, o := range ts {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "web" && tk.Status.Ready {
				task = tk
				return true
			}
		}
		return false
	})
	if task.Spec.Node != wsrv.NodeID() {
		t.Fatalf("the task runs on %q, want the worker %s", task.Spec.Node, wsrv.NodeID())
	}
	if _, err := cl.Get(ctx, legion.KindNode, "", msrv.NodeID()); err == nil {
		t.Fatalf("the manager %s, which runs no agent, has a Node", msrv.NodeID())
	}
	o, err := cl.Get(ctx, legion.KindService, "default", "web")
	if err != nil || o.(*legion.Service).Status.VIP == "" {
		t.Fatalf("the service has no VIP from the leader: %+v %v", o, err)
	}
}
