package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

func readyCount(c *schedtest.Cluster, owner string) int {
	n := 0
	for _, tk := range c.Live(owner) {
		if tk.Status.State == legion.TaskRunning && tk.Status.Ready {
			n++
		}
	}
	return n
}

// drainingN1 is two nodes where manifest was placed on n1 alone, then
// n2 opened and n1 set to drain.
func drainingN1(t *testing.T, manifest string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, 2)
	c.SetAvailability("n2", legion.AvailabilityPause)
	c.ApplyAndConverge(manifest)
	c.SetAvailability("n2", legion.AvailabilityActive)
	c.SetAvailability("n1", legion.AvailabilityDrain)
	return c
}

func TestMaxUnavailableZeroSurgesInsteadOfStalling(t *testing.T) {
	t.Parallel()
	c := updating(t, "stop-first", "pause", 0, "0s", ", maxUnavailable: 0")
	watch(c, 20*time.Second, func() {
		if r := readyCount(c, "app"); r < 4 {
			t.Fatalf("at %s %d ready: maxUnavailable 0 must never take a ready task away first", c.Now, r)
		}
	})
	if got := images(c, "app"); got["app:2"] != 4 || len(got) != 1 {
		t.Fatalf("update stalled: %v", got)
	}
}

func TestMaxUnavailableBoundsStopFirstUpdates(t *testing.T) {
	t.Parallel()
	c := updating(t, "stop-first", "pause", 0, "0s", ", maxUnavailable: 1")
	watch(c, 20*time.Second, func() {
		if r := readyCount(c, "app"); r < 3 {
			t.Fatalf("at %s %d ready: maxUnavailable 1 allows one slot without a ready task", c.Now, r)
		}
	})
	if got := images(c, "app"); got["app:2"] != 4 {
		t.Fatalf("update did not finish: %v", got)
	}
}

func TestDrainHonoursTheDisruptionBudget(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	// Three tasks on n1 only, then n2 opens.
	c.SetAvailability("n2", legion.AvailabilityPause)
	c.Apply(updSpec("app:1", "stop-first", "pause", 1, "0s", ", maxUnavailable: 1"))
	c.ApplyAndConverge(strings.Replace(updSpec("app:1", "stop-first", "pause", 1, "0s", ", maxUnavailable: 1"), "replicas: 4", "replicas: 3", 1))
	c.SetAvailability("n2", legion.AvailabilityActive)
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Plan()
	stopping := 0
	for _, tk := range c.OwnerTasks("app") {
		if tk.Spec.DesiredState == legion.TaskShutdown {
			stopping++
		}
	}
	if stopping != 1 {
		t.Fatalf("drain stopped %d tasks at once, maxUnavailable 1 allows 1", stopping)
	}
	watch(c, 10*time.Second, func() {
		if r := readyCount(c, "app"); r < 2 {
			t.Fatalf("at %s %d ready during the drain", c.Now, r)
		}
	})
	if diff := cmp.Diff(map[string]int{"n2": 3}, c.NodesOf("app")); diff != "" {
		t.Fatalf("after the drain (-want +got):\n%s", diff)
	}
	if ds := c.Node("n1").Status.Drain; ds.State != legion.DrainCompleted {
		t.Fatalf("drain %+v", ds)
	}
}

func TestDrainWithMaxUnavailableZeroStartsTheReplacementFirst(t *testing.T) {
	t.Parallel()
	c := drainingN1(t, strings.Replace(updSpec("app:1", "stop-first", "pause", 1, "0s", ", maxUnavailable: 0"), "replicas: 4", "replicas: 1", 1))
	c.Plan()
	ds := c.Node("n1").Status.Drain
	if ds == nil || len(ds.Remaining) != 1 || !strings.HasPrefix(ds.Remaining[0].Reason, "waiting for its replacement app-1-2") {
		t.Fatalf("drain status %+v, want the task waiting for its replacement", ds)
	}
	if tk := c.Task("app-1-1"); tk.Spec.DesiredState != legion.TaskRunning {
		t.Fatalf("old task stopped before its replacement was ready")
	}
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n2": 1}, c.NodesOf("app")); diff != "" {
		t.Fatalf("after the drain (-want +got):\n%s", diff)
	}
}

func TestTaints(t *testing.T) {
	t.Parallel()
	svc := func(tol string) string {
		return `
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 2
  placement: {tolerations: [` + tol + `]}
  pod: {containers: [{name: c, image: s:1}]}
`
	}
	t.Run("NoSchedule keeps new tasks off", func(t *testing.T) {
		c := schedtest.New(t)
		c.AddNode("a", schedtest.Taint("dedicated", "db", legion.NoSchedule))
		c.AddNode("b")
		c.ApplyAndConverge(svc(""))
		if diff := cmp.Diff(map[string]int{"b": 2}, c.NodesOf("s")); diff != "" {
			t.Fatal(diff)
		}
	})
	t.Run("a matching toleration lets them on", func(t *testing.T) {
		c := schedtest.New(t)
		c.AddNode("a", schedtest.Taint("dedicated", "db", legion.NoSchedule))
		c.AddNode("b")
		c.ApplyAndConverge(svc("{key: dedicated, value: db, effect: NoSchedule}"))
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, c.NodesOf("s")); diff != "" {
			t.Fatal(diff)
		}
	})
	t.Run("a toleration for another value does not", func(t *testing.T) {
		c := schedtest.New(t)
		c.AddNode("a", schedtest.Taint("dedicated", "db", legion.NoSchedule))
		c.ApplyAndConverge(svc("{key: dedicated, value: web}"))
		live := c.Live("s")
		if len(live) != 2 || live[0].Status.Message != "no node can run it: 1 node has untolerated taint dedicated=db:NoSchedule" {
			t.Fatalf("%v", describeTasks(live))
		}
	})
	t.Run("NoSchedule leaves running tasks, NoExecute evicts them", func(t *testing.T) {
		c := schedtest.WithNodes(t, 2)
		c.ApplyAndConverge(svc(""))
		c.SetTaints("n1", legion.Taint{Key: "k", Effect: legion.NoSchedule})
		c.Converge()
		if c.NodesOf("s")["n1"] != 1 {
			t.Fatalf("NoSchedule moved a running task: %v", c.NodesOf("s"))
		}
		c.SetTaints("n1", legion.Taint{Key: "k", Effect: legion.NoExecute})
		c.Converge()
		if diff := cmp.Diff(map[string]int{"n2": 2}, c.NodesOf("s")); diff != "" {
			t.Fatalf("NoExecute: %s", diff)
		}
		// The evicted task says why it stopped, beside the agent's word.
		evicted := 0
		for _, tk := range c.OwnerTasks("s") {
			if tk.Spec.Node != "n1" {
				continue
			}
			evicted++
			if tk.Spec.StopReason != "evicted by taint k:NoExecute" || !strings.Contains(tk.Message(), tk.Spec.StopReason) {
				t.Errorf("task %s on n1: stop reason %q, message %q", tk.Metadata.Name, tk.Spec.StopReason, tk.Message())
			}
		}
		if evicted == 0 {
			t.Error("no task of s was on n1")
		}
	})
	t.Run("PreferNoSchedule is a last choice", func(t *testing.T) {
		c := schedtest.New(t)
		c.AddNode("a", schedtest.Taint("spot", "", legion.PreferNoSchedule))
		c.AddNode("b", schedtest.Resources("1", "8Gi"))
		c.Apply(strings.Replace(svc(""), "image: s:1}", "image: s:1, resources: {requests: {cpu: 500m}}}", 1))
		c.ApplyAndConverge(strings.Replace(strings.Replace(svc(""), "image: s:1}", "image: s:1, resources: {requests: {cpu: 500m}}}", 1), "replicas: 2", "replicas: 3", 1))
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 2}, c.NodesOf("s")); diff != "" {
			t.Fatalf("PreferNoSchedule (-want +got):\n%s", diff)
		}
	})
}

func TestStartFirstServiceDrainsByStartingTheReplacementFirst(t *testing.T) {
	t.Parallel()
	c := drainingN1(t, strings.Replace(updSpec("app:1", "start-first", "pause", 1, "0s", ""), "replicas: 4", "replicas: 2", 1))
	watch(c, 5*time.Second, func() {
		if r := readyCount(c, "app"); r < 2 {
			t.Fatalf("at %s %d ready: a start-first service drains by surging", c.Now, r)
		}
	})
	if diff := cmp.Diff(map[string]int{"n2": 2}, c.NodesOf("app")); diff != "" {
		t.Fatalf("after the drain (-want +got):\n%s", diff)
	}
}
