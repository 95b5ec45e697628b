package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/topui"
)

// On a real one-node cluster, the usage the node's heartbeats carry
// reaches legion top tasks and services through Cluster.Usage, and
// legion top --once prints every view.
func TestTopOnADaemon(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("web", ""))
	run := func(args ...string) string {
		t.Helper()
		out, errOut := &syncBuffer{}, &syncBuffer{}
		if err := rootWith(out, errOut, append(args, "--server", n.API, "--credentials", n.Admin)...).ExecuteContext(ctx); err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	var tasks []topui.TaskUsage
	waitFor(t, "legion top tasks to show web's task using memory", func() bool {
		tasks = nil
		if err := json.Unmarshal([]byte(run("top", "tasks", "-o", "json")), &tasks); err != nil {
			t.Fatal(err)
		}
		return len(tasks) == 1 && tasks[0].Reported && tasks[0].Memory > 0
	})
	if tasks[0].Owner != "Service/web" || tasks[0].Node != n.Name {
		t.Errorf("legion top tasks: %+v, want web's task on %s", tasks[0], n.Name)
	}
	// kubectl's name for the view works too.
	var pods []topui.TaskUsage
	if err := json.Unmarshal([]byte(run("top", "pods", "-o", "json")), &pods); err != nil || len(pods) != 1 || pods[0].Name != tasks[0].Name {
		t.Errorf("legion top pods: %+v (%v), want the tasks view", pods, err)
	}
	var services []topui.ServiceUsage
	if err := json.Unmarshal([]byte(run("top", "services", "-o", "json")), &services); err != nil {
		t.Fatal(err)
	}
	if len(services) != 1 || services[0].Name != "web" || services[0].Tasks != 1 || !services[0].Reported || services[0].Memory <= 0 {
		t.Errorf("legion top services: %+v, want the usage of web's one task", services)
	}
	nodes := run("top", "nodes")
	if !strings.Contains(nodes, n.Name) || !strings.Contains(nodes, "ready") {
		t.Errorf("legion top nodes:\n%s", nodes)
	}
	// kubectl's singular names, as kubectl top node and top pod take them.
	if node := run("top", "node"); !strings.Contains(node, n.Name) {
		t.Errorf("legion top node:\n%s", node)
	}
	once := run("top", "--once", "--width", "160")
	for _, want := range []string{"legion top", "NODES (1)", "WORKLOADS (1)", "TASKS (1)", "STORAGE (0)", "NETWORK (0)", "CONFIG", "EVENTS", n.Name, "web"} {
		if !strings.Contains(once, want) {
			t.Errorf("legion top --once does not show %q:\n%s", want, once)
		}
	}
}

// Without a terminal, legion top's live view is refused before anything
// is asked of the cluster, naming what prints instead (it failed with
// "could not open a new TTY").
func TestTopWithoutATerminalSaysWhatPrints(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "top", "--server", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "--once prints every view as text") ||
		!strings.Contains(err.Error(), "legion top nodes|tasks|services") {
		t.Fatalf("legion top without a terminal: %v\n%s", err, out)
	}
}
