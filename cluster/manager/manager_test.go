package manager

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testpoll"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func poll(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, d, 20*time.Millisecond, cond)
}

// A manager started fresh, with no agent anywhere, takes up the leader's
// work once it is initialised: a service applied gets its VIP and a task
// the planner could place nowhere (no node), pending with the reason.
// Stop ends that work before the store closes.
func TestManagerLeadsWithoutAnAgentOnceInitialised(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var m *Manager
	t.Cleanup(func() {
		if m != nil {
			if err := m.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	m, err := Start(Config{Server: server.Config{DataDir: dir, Listen: "127.0.0.1:0", WriteTimeout: 5 * time.Second,
		Timing: store.FastTiming()},
		LeaderCheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bare, err := client.New(client.Options{Server: m.Server().Addr(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.Init(ctx)
	bare.Close()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{Server: m.Server().Addr(), CredentialsFile: filepath.Join(dir, server.AdminFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: localhost/web:1, pullPolicy: never}]}
  endpoint:
    ports: [{name: http, port: 80, targetPort: 8080}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the service's VIP", 20*time.Second, func() bool {
		o, err := cl.Get(ctx, legion.KindService, "default", "web")
		return err == nil && o.(*legion.Service).Status.VIP != ""
	})
	var task *legion.Task
	poll(t, "a task of the service", 20*time.Second, func() bool {
		ts, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: "default"})
		if err != nil || len(ts) == 0 {
			return false
		}
		task = ts[0].(*legion.Task)
		return true
	})
	if task.Spec.Owner.Name != "web" || task.Spec.Node != "" || task.Status.State != legion.TaskPending || task.Status.Message == "" {
		t.Fatalf("task %s: owner %s, node %q, %s %q; want web's, on no node, pending with the reason",
			task.Metadata.Name, task.Spec.Owner.Name, task.Spec.Node, task.Status.State, task.Status.Message)
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-m.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
}
