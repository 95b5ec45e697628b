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
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/jail/process"
)

// legion daemon on a manager: after init, its agent registers through the
// dispatcher over mutual TLS, the leader plans, and a job applied through
// the API runs to completion on the node.
func TestDaemonRunsWorkloadsThroughTheDispatcher(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.New(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", WriteTimeout: 5 * time.Second,
		Timing: store.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
			SnapshotThreshold: 1 << 20, SnapshotInterval: time.Hour, TrailingLogs: 100}})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
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
		srv.Stop()
		<-served
		// A daemon leaves its pods running for the next one: remove them.
		rt, err := process.New(process.Config{DataDir: filepath.Join(dir, "data"), Shim: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := rt.List(context.Background(), nil)
		for _, c := range cs {
			rt.Remove(context.Background(), c.ID)
		}
		rt.Wait()
	}()
	bare, err := client.New(client.Options{Server: srv.Addr(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	bare.Close()
	cl, err := client.New(client.Options{Server: srv.Addr(), CredentialsFile: filepath.Join(dir, "data", server.AdminFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
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
