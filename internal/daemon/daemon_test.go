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
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/internal/testcluster"
)

// removeAllPods removes the pods a daemon left running for the next one,
// with their roots.
func removeAllPods(t testing.TB, dataDir string) {
	if err := RemoveLeftContainers(context.Background(), dataDir, os.Args[0]); err != nil {
		t.Error(err)
	}
}

// legion daemon on a manager: after init, its agent registers through the
// dispatcher over mutual TLS, the leader plans, and a job applied through
// the API runs to completion on the node.
func TestDaemonRunsWorkloadsThroughTheDispatcher(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Leader: true})
	srv, data := c.Managers[0].Server, c.Managers[0].Dir
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- RunAgent(ctx, srv, Options{DataDir: data, RunDir: filepath.Join(t.TempDir(), "run"), DNSListen: "127.0.0.1:0"}, nil)
	}()
	defer func() {
		cancel()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() { removeAllPods(t, data) })
	cl := c.Client()
	poll(t, "the node registered", 30*time.Second, func() bool {
		o, err := cl.Get(context.Background(), legion.KindNode, "", srv.NodeID())
		return err == nil && o.(*legion.Node).Status.PodCIDR != ""
	})
	// The image ships with the example; load it as `legion image load` would.
	images, err := OpenImages(Options{DataDir: data, Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	images.Close()
	objs, err := legion.ParseManifest("t", []byte(testPod("Job", "hello", "say", `[-say, hi, -exit, "0"]`)))
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
	// The VIP and the node's subnet are in the ranges the cluster was
	// initialised with, and served at their images in 127/8.
	plan, err := netplan.Read(srv.Store())
	if err != nil {
		t.Fatal(err)
	}
	if a := netip.MustParseAddr(vip); !plan.Service.Contains(a) {
		t.Errorf("VIP %s is outside the cluster's service range %s", a, plan.Service)
	}
	if o, err := cl.Get(context.Background(), legion.KindNode, "", srv.NodeID()); err != nil || !plan.Pod.Contains(netip.MustParsePrefix(o.(*legion.Node).Status.PodCIDR).Addr()) {
		t.Errorf("the node's pod subnet is outside the cluster's pod range %s (%v)", plan.Pod, err)
	}
	local := LocalAddr(netip.MustParseAddr(vip), plan.ServiceOctet()).String()
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
	c := testcluster.New(t, testcluster.Options{Leader: true, Workers: 1})
	msrv, wsrv, wdir := c.Managers[0].Server, c.Workers[0].Server, c.Workers[0].Dir
	cl := c.Client()
	ctx := context.Background()
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
		agentDone <- RunAgent(actx, wsrv, Options{DataDir: wdir, RunDir: filepath.Join(t.TempDir(), "run"), DNSListen: "127.0.0.1:0"}, nil)
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
