package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// node label sets and removes a node's labels, node update changes its
// availability and labels as docker node update does, and bad input is
// refused naming what was expected, with nothing written.
func TestNodeLabelAndUpdate(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	labels := func() map[string]string {
		t.Helper()
		o, err := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Node).Metadata.Labels
	}
	if out, err := run("node", "label", n.Name, "zone=a", "disk=ssd"); err != nil || !strings.Contains(out, "disk=ssd zone=a") {
		t.Fatalf("node label: %v\n%s", err, out)
	}
	if out, err := run("node", "label", n.Name, "disk-"); err != nil || labels()["disk"] != "" || labels()["zone"] != "a" {
		t.Fatalf("node label disk-: %v %v\n%s", err, labels(), out)
	}
	if out, err := run("node", "update", n.Name, "--availability", "pause", "--label-add", "rack=r1", "--label-rm", "zone"); err != nil {
		t.Fatalf("node update: %v\n%s", err, out)
	}
	o, _ := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
	if nd := o.(*legion.Node); nd.Spec.Availability != legion.AvailabilityPause || nd.Metadata.Labels["rack"] != "r1" || nd.Metadata.Labels["zone"] != "" {
		t.Fatalf("after node update: %v %v", nd.Spec.Availability, nd.Metadata.Labels)
	}
	// kubectl's label takes nodes as it takes any kind.
	if out, err := run("label", "node", n.Name, "rack=r2"); err == nil || !strings.Contains(err.Error(), `label rack has the value "r1" already: --overwrite changes it`) {
		t.Fatalf("label node without --overwrite: %v\n%s", err, out)
	}
	if out, err := run("label", "node/"+n.Name, "rack=r2", "--overwrite"); err != nil || out != "node/"+n.Name+" labelled: rack=r2\n" || labels()["rack"] != "r2" {
		t.Fatalf("label node/NAME --overwrite: %v %v\n%s", err, labels(), out)
	}
	before := labels()
	for _, bad := range [][]string{
		{"node", "label", n.Name, "novalue"},
		{"node", "label", n.Name, "k=v", "k-"},
		{"node", "label", n.Name, "Bad Key=v"},
		{"node", "update", n.Name, "--availability", "gone"},
		{"node", "update", n.Name},
	} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
	if after := labels(); len(after) != len(before) || after["rack"] != before["rack"] {
		t.Fatalf("a refused change wrote labels: %v, were %v", after, before)
	}
}

// Removing a label that a running service's constraint reads says that
// its tasks stay, and what places them again; a global service's task
// (stopped by the planner), one whose constraint still holds, and tasks
// on another node say nothing.
func TestUnmetConstraints(t *testing.T) {
	t.Parallel()
	node := &legion.Node{}
	node.Metadata.Name, node.Metadata.Labels = "n1", map[string]string{"zone": "a"}
	svc := func(name, ns string, global bool, constraints ...string) *legion.Service {
		o, _ := legion.New(legion.KindService)
		s := o.(*legion.Service)
		s.Metadata.Name, s.Metadata.Namespace = name, ns
		s.Spec.Placement.Constraints = constraints
		if global {
			s.Spec.Mode = legion.ModeGlobal
		}
		return s
	}
	task := func(owner, ns, node string, state legion.TaskState) *legion.Task {
		tk := &legion.Task{Spec: legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: owner}, Node: node, DesiredState: legion.TaskRunning}}
		tk.Metadata.Namespace, tk.Status.State = ns, state
		return tk
	}
	svcs := []legion.Object{
		svc("web", "shop", false, "node.labels.zone == a", "node.labels.disk == ssd"),
		svc("agent", "default", true, "node.labels.disk == ssd"),
		svc("fine", "default", false, "node.labels.zone == a"),
		svc("elsewhere", "default", false, "node.labels.disk == ssd"),
	}
	tasks := []legion.Object{
		task("web", "shop", "n1", legion.TaskRunning), task("web", "shop", "n1", legion.TaskStarting),
		task("web", "shop", "n1", legion.TaskFailed), task("agent", "default", "n1", legion.TaskRunning),
		task("fine", "default", "n1", legion.TaskRunning), task("elsewhere", "default", "n2", legion.TaskRunning),
	}
	got := unmetConstraints(node, svcs, tasks)
	want := []string{"service/web -n shop: 2 of its tasks run on node n1, which no longer meets its constraint node.labels.disk == ssd: " +
		"running tasks stay where they are (constraints are checked when a task is placed); legion rollout restart service/web -n shop places them again"}
	if !slices.Equal(got, want) {
		t.Fatalf("unmetConstraints:\n%q\nwant\n%q", got, want)
	}
}
