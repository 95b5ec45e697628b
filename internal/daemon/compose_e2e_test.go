package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
)

// composeOrderStack is a compose file as its authors meant it: web waits
// for db's healthcheck, reaches db at db:5432 though db only exposes it,
// and reads a bind mount of hostDir; flaky is restarted on failure, three
// times at most.
// db's healthcheck passes once /tmp/go exists in its container.
func composeOrderStack(hostDir string) string {
	return fmt.Sprintf(`services:
  web:
    image: %[1]s
    command: [-listen, "0.0.0.0:8080"]
    environment: {NAME: web}
    ports: [{target: 8080}]
    volumes: ["%[2]s:/data:ro"]
    depends_on:
      db: {condition: service_healthy}
  db:
    image: %[1]s
    command: [-listen, "0.0.0.0:5432"]
    environment: {NAME: db}
    expose: ["5432"]
    healthcheck:
      test: ["CMD", "server", "-cat", "/tmp/go"]
      interval: 1s
      timeout: 2s
      retries: 1000
  flaky:
    image: %[1]s
    command: [-exit, "1"]
    restart: "on-failure:3"
`, testImage, hostDir)
}

func tasksOf(t testing.TB, cl *client.Client, ns, svc string) []*legion.Task {
	t.Helper()
	objs, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: ns, Labels: map[string]string{"legion.service": svc}})
	if err != nil {
		return nil
	}
	out := make([]*legion.Task, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*legion.Task))
	}
	return out
}

// The acceptance of compose's ordering, ports, restarts and bind mounts
// on a real node: the bind mount is refused in a namespace that does not
// allow host paths; where allowed, web's task stays Pending, saying why,
// until db's healthcheck passes, and starts only after; web reaches db by
// name on a port db only exposes and reads the host's file; flaky's
// container is restarted after it fails.
func TestComposeStackAsItsAuthorsMeantIt(t *testing.T) {
	n := startNetNSNode(t)
	ctx := context.Background()
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "hello.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := []byte(composeOrderStack(hostDir))
	convert := func(ns string) *compose.Result {
		t.Helper()
		res, err := compose.Convert(ctx, []compose.File{{Name: "compose.yaml", Content: text}}, compose.Options{Stack: "shop", Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// The default namespace allows no host paths: refused, saying how to
	// get it allowed.
	_, err := n.Client.Apply(ctx, convert(legion.DefaultNamespace).Objects, client.ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "volumes[0].hostPath: hostPath") || !strings.Contains(err.Error(), "a cluster admin may add them") {
		t.Fatalf("a bind mount in the default namespace: got %v, want a refusal naming hostPath and the way out", err)
	}

	// An admin's namespace allowing host paths takes it.
	res := convert("")
	ns := res.Namespace
	ns.Spec.Security.Allow = append(ns.Spec.Security.Allow, legion.AllowHostPath)
	if _, err := n.Client.Apply(ctx, []legion.Object{ns}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Apply(ctx, res.Objects, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := n.Client.Get(ctx, legion.KindService, "shop", "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if rp := o.(*legion.Service).Spec.Pod.RestartPolicy; rp == nil || rp.Condition != legion.RestartOnFailure || rp.MaxAttempts != 3 {
		t.Errorf("flaky's restart policy %+v, want on-failure with 3 attempts", rp)
	}

	// db runs, unready; web waits, Pending, with the reason.
	var db *legion.Task
	poll(t, "db running unready and web waiting for it", 60*time.Second, func() bool {
		db = nil
		for _, tk := range tasksOf(t, n.Client, "shop", "db") {
			if tk.Status.State == legion.TaskRunning && !tk.Status.Ready {
				db = tk
			}
		}
		web := tasksOf(t, n.Client, "shop", "web")
		return db != nil && len(web) == 1 && web[0].Status.Message == "waiting for db to be ready"
	})
	for _, tk := range tasksOf(t, n.Client, "shop", "web") {
		if tk.Status.State != legion.TaskPending || tk.Status.Started != nil || tk.Spec.Node != "" {
			t.Fatalf("web task %s is %s on %q (started %v) while db is unready", tk.Metadata.Name, tk.Status.State, tk.Spec.Node, tk.Status.Started)
		}
	}

	// db's healthcheck passes from now; web starts after.
	healthy := time.Now()
	if code, out := inPod(ctx, n.Runtime, db, "db", "-touch", "/tmp/go"); code != 0 {
		t.Fatalf("touching /tmp/go in db: exit %d: %s", code, out)
	}
	var web []*legion.Task
	poll(t, "web ready", 60*time.Second, func() bool {
		web = readyOf(t, n.Client, "shop", "web")
		return len(web) == 1
	})
	if s := web[0].Status.Started; s == nil || !s.After(healthy) {
		t.Errorf("web started at %v, before db's healthcheck could pass (%v)", s, healthy)
	}
	if !db.Status.Started.Before(healthy) {
		t.Errorf("db started at %v, not before web's wait ended", db.Status.Started)
	}

	// db:5432, a port db only exposes, answers from web's container.
	poll(t, "web reaching db:5432 by name", 30*time.Second, func() bool {
		code, out := inPod(ctx, n.Runtime, web[0], "web", "-get", "http://db:5432/")
		return code == 0 && strings.TrimSpace(out) == "db"
	})
	// The bind mount shows the host's file.
	if code, out := inPod(ctx, n.Runtime, web[0], "web", "-cat", "/data/hello.txt"); code != 0 || out != "from the host\n" {
		t.Errorf("web reading the bind mount: exit %d, %q", code, out)
	}

	// flaky's container, exiting 1, is restarted in place (the agent's
	// tests show the policy ends after maxAttempts).
	poll(t, "flaky restarted after failing", 30*time.Second, func() bool {
		for _, tk := range tasksOf(t, n.Client, "shop", "flaky") {
			if tk.Status.Restarts >= 1 || strings.Contains(tk.Status.Message, "exited with 1: restarting") {
				return true
			}
		}
		return false
	})
}
