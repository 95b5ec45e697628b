package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

func TestNodeHealthSuspectThenDownReplacesItsTasks(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.ApplyAndConverge(webYAML)
	lost := c.Task("web-1-1").Spec.Node
	c.SetTask("web-1-1", func(t *legion.Task) { // as an agent reports a ready container
		t.Status.Containers = []legion.ContainerStatus{{Name: "web", State: "running", Ready: true}}
	})
	c.Silent[lost] = true

	c.Run(4 * time.Second) // two missed heartbeats
	if st := c.Node(lost).Status.State; st != legion.NodeReady {
		t.Fatalf("after 4s silent: %s, want ready", st)
	}
	c.Run(2 * time.Second) // three missed
	if st := c.Node(lost).Status.State; st != legion.NodeSuspect {
		t.Fatalf("after 6s silent: %s, want suspect", st)
	}
	if tk := c.Task("web-1-1"); tk.Status.State != legion.TaskRunning || tk.Spec.DesiredState != legion.TaskRunning {
		t.Fatalf("a suspect node's task must not be replaced: %s desired %s", tk.Status.State, tk.Spec.DesiredState)
	}
	// Out of the endpoints, its task no longer counts ready, and the
	// service says why.
	there := c.NodesOf("web")[lost]
	what := "1 ready task"
	if there > 1 {
		what = fmt.Sprintf("%d ready tasks", there)
	}
	if st := c.Services["default/web"].Status; st.Running != 3 || st.Ready != 3-there ||
		!strings.Contains(st.Message, what+" on node "+lost+", suspect (its heartbeats stopped), out of the endpoints") {
		t.Errorf("a service with %d of 3 tasks on a suspect node: %d running, %d ready, message %q; want 3, %d and why", there, st.Running, st.Ready, st.Message, 3-there)
	}
	// A suspect node gets no new tasks.
	c.ApplyAndConverge(stringsReplace(webYAML, "replicas: 3", "replicas: 6"))
	if n := c.NodesOf("web")[lost]; n != 1 {
		t.Fatalf("suspect node %s got new tasks: %d of web there", lost, n)
	}
	c.Run(10 * time.Second) // 16 s silent: down
	if st := c.Node(lost).Status.State; st != legion.NodeDown {
		t.Fatalf("after 16s silent: %s, want down", st)
	}
	tk := c.Task("web-1-1")
	if tk.Status.State != legion.TaskOrphaned || tk.Spec.DesiredState != legion.TaskShutdown {
		t.Fatalf("a down node's task: %s desired %s, want orphaned and told to stop", tk.Status.State, tk.Spec.DesiredState)
	}
	if want := "node " + lost + " went down"; tk.Status.Message != want {
		t.Errorf("a down node's task says %q, want %q, true still once the node is back", tk.Status.Message, want)
	}
	if tk.Status.Ready || len(tk.Status.Containers) != 1 || tk.Status.Containers[0].Ready {
		t.Errorf("a down node's task is still said ready: %v, containers %+v", tk.Status.Ready, tk.Status.Containers)
	}
	if live := c.Live("web"); len(live) != 6 || c.NodesOf("web")[lost] != 0 {
		t.Fatalf("slot not refilled elsewhere: %v", describeTasks(live))
	}
	// Heard from again, it is ready; tasks do not move back.
	delete(c.Silent, lost)
	c.Run(time.Second)
	if st := c.Node(lost).Status.State; st != legion.NodeReady {
		t.Fatalf("heard from again: %s, want ready", st)
	}
	if n := c.NodesOf("web")[lost]; n != 0 {
		t.Fatalf("tasks moved back to %s by themselves: %d", lost, n)
	}
}

func TestNewLeaderWaitsBeforeMarkingNodesDown(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(webYAML)
	// A new leader takes over now and has heard from nobody yet.
	c.LeaderSince = c.Now
	c.Heartbeats = map[string]time.Time{}
	c.Silent["n1"] = true
	c.Silent["n2"] = true
	r := c.Plan()
	for _, n := range r.UpdateNodes {
		t.Fatalf("a new leader changed node %s to %s before hearing from it", n.Metadata.Name, n.Status.State)
	}
	if want := c.Now.Add(16 * time.Second); !r.NextWake.Equal(want) {
		t.Fatalf("next wake %s, want %s (eight periods after taking over)", r.NextWake, want)
	}
	delete(c.Silent, "n2")
	c.Advance(15 * time.Second)
	c.Step()
	if st := c.Node("n1").Status.State; st != legion.NodeReady {
		t.Fatalf("15s after taking over: n1 %s, want unchanged (ready)", st)
	}
	c.Advance(time.Second)
	c.Step()
	if st := c.Node("n1").Status.State; st != legion.NodeDown {
		t.Fatalf("16s after taking over without a heartbeat: n1 %s, want down", st)
	}
	if st := c.Node("n2").Status.State; st != legion.NodeReady {
		t.Fatalf("n2 heard from: %s", st)
	}
}

func TestDrainMovesTasksAndReportsCompletion(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.ApplyAndConverge(webYAML)
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Plan()
	ds := c.Node("n1").Status.Drain
	if ds == nil || ds.State != legion.DrainDraining || len(ds.Remaining) != 1 || ds.Remaining[0].Reason != "stopping" {
		t.Fatalf("drain status right after draining: %+v", ds)
	}
	c.Converge()
	if n := c.NodesOf("web")["n1"]; n != 0 || len(c.Live("web")) != 3 {
		t.Fatalf("after the drain: %d on n1, %d live", n, len(c.Live("web")))
	}
	if ds := c.Node("n1").Status.Drain; ds == nil || ds.State != legion.DrainCompleted {
		t.Fatalf("drain status %+v, want completed", ds)
	}
	c.SetAvailability("n1", legion.AvailabilityActive)
	c.Converge()
	if c.Node("n1").Status.Drain != nil {
		t.Fatalf("an active node keeps a drain status")
	}
}

func TestDrainBlockedByUnreachableNode(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(stringsReplace(webYAML, "replicas: 3", "replicas: 2"))
	onN1 := taskOn(c, "web", "n1")
	c.Silent["n1"] = true
	c.Run(6 * time.Second)
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Converge()
	ds := c.Node("n1").Status.Drain
	want := &legion.DrainStatus{State: legion.DrainBlocked, Remaining: []legion.DrainItem{{Kind: legion.KindTask, Name: "default/" + onN1, Reason: "unreachable"}}}
	if diff := cmp.Diff(want, ds); diff != "" {
		t.Fatalf("drain of a suspect node (-want +got):\n%s", diff)
	}
	c.Run(10 * time.Second) // down: orphaned, not seen to stop
	ds = c.Node("n1").Status.Drain
	if ds == nil || ds.State != legion.DrainBlocked || len(ds.Remaining) != 1 || ds.Remaining[0].Reason != "unconfirmed" {
		t.Fatalf("drain of a down node: %+v, want blocked on an unconfirmed task", ds)
	}
	delete(c.Silent, "n1")
	c.Run(time.Second)
	if ds := c.Node("n1").Status.Drain; ds == nil || ds.State != legion.DrainCompleted {
		t.Fatalf("drain once the node is back: %+v, want completed", ds)
	}
}

func TestPausedNodeKeepsTasksButGetsNoNewOnes(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(stringsReplace(webYAML, "replicas: 3", "replicas: 2"))
	c.SetAvailability("n1", legion.AvailabilityPause)
	c.ApplyAndConverge(webYAML)
	if diff := cmp.Diff(map[string]int{"n1": 1, "n2": 2}, c.NodesOf("web")); diff != "" {
		t.Fatalf("placement with n1 paused (-want +got):\n%s", diff)
	}
}

func TestGlobalServiceSlotGoesWithItsLostNode(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: agent}
spec:
  mode: global
  pod: {containers: [{name: a, image: agent:1}]}
`)
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n1": 1, "n2": 1, "n3": 1}, c.NodesOf("agent")); diff != "" {
		t.Fatalf("global placement (-want +got):\n%s", diff)
	}
	c.Silent["n2"] = true
	c.Run(16 * time.Second)
	if tk := c.Task("agent-n2-1"); tk.Status.State != legion.TaskOrphaned {
		t.Fatalf("global task of the down node: %s", tk.Status.State)
	}
	if diff := cmp.Diff(map[string]int{"n1": 1, "n3": 1}, c.NodesOf("agent")); diff != "" {
		t.Fatalf("the lost node's slot must not run elsewhere (-want +got):\n%s", diff)
	}
	delete(c.Silent, "n2")
	c.Run(2 * time.Second)
	if tk := c.Task("agent-n2-2"); tk == nil || tk.Status.State != legion.TaskRunning {
		t.Fatalf("node back: want agent-n2-2 running (the slot keeps its task number), got %v", describeTasks(c.Live("agent")))
	}
	// A new node gets a task; a drained one loses it.
	c.AddNode("n4")
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n2": 1, "n3": 1, "n4": 1}, c.NodesOf("agent")); diff != "" {
		t.Fatalf("after adding n4 and draining n1 (-want +got):\n%s", diff)
	}
}

func taskOn(c *schedtest.Cluster, owner, node string) string {
	for _, tk := range c.Live(owner) {
		if tk.Spec.Node == node {
			return tk.Metadata.Name
		}
	}
	return ""
}
