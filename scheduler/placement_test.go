package scheduler_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

func zoneOf(c *schedtest.Cluster, owner string) map[string]int {
	m := map[string]int{}
	for node, n := range c.NodesOf(owner) {
		m[c.Node(node).Metadata.Labels["zone"]] += n
	}
	return m
}

func TestSpreadPreferenceBalancesOverLabelValues(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	// Zone a has three nodes, zone b one, and one node has no zone.
	c.AddNodes("a", 3, schedtest.Labels("zone", "a"))
	c.AddNode("b1", schedtest.Labels("zone", "b"))
	c.AddNode("x1")
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 6
  placement: {preferences: [{spread: node.labels.zone}]}
  pod: {containers: [{name: c, image: s:1}]}
`)
	c.Converge()
	// Nodes without the key are one more value: 2 per value.
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2, "": 2}, zoneOf(c, "s")); diff != "" {
		t.Fatalf("spread (-want +got):\n%s", diff)
	}
}

func TestNestedSpreadPreferences(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNode("a1", schedtest.Labels("zone", "a", "rack", "1"))
	c.AddNode("a2", schedtest.Labels("zone", "a", "rack", "1"))
	c.AddNode("a3", schedtest.Labels("zone", "a", "rack", "2"))
	c.AddNode("b1", schedtest.Labels("zone", "b", "rack", "1"))
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 4
  placement: {preferences: [{spread: node.labels.zone}, {spread: node.labels.rack}]}
  pod: {containers: [{name: c, image: s:1}]}
`)
	c.Converge()
	// Two per zone; within zone a, one per rack.
	got := c.NodesOf("s")
	if got["b1"] != 2 || got["a3"] != 1 || got["a1"]+got["a2"] != 1 {
		t.Fatalf("nested spread: %v", got)
	}
}

func TestRequiredAntiAffinityAndHostPorts(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: db, labels: {app: db}}
spec:
  replicas: 1
  placement: {constraints: ["node.name == n1"]}
  pod: {containers: [{name: c, image: db:1}]}
`)
	c.Converge()
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: cache}
spec:
  replicas: 3
  placement: {antiAffinity: [{services: {app: db}, required: true}]}
  pod: {containers: [{name: c, image: cache:1, ports: [{name: p, containerPort: 80}]}]}
  endpoint: {ports: [{port: 80, targetPort: p, publish: host, publishedPort: 8080}]}
`)
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n2": 1, "n3": 1}, c.NodesOf("cache")); diff != "" {
		t.Fatalf("cache placement (-want +got):\n%s", diff)
	}
	var pending *legion.Task
	for _, tk := range c.Live("cache") {
		if tk.Status.State == legion.TaskPending {
			pending = tk
		}
	}
	want := "no node can run it: 2 nodes have host port 8080/tcp in use, 1 node runs tasks it must avoid"
	if pending == nil || pending.Status.Message != want {
		t.Fatalf("pending task: %v, want message %q", describeTasks(c.Live("cache")), want)
	}
}

func TestImagePlatformRejectionKeepsTasksOffThatPlatform(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNode("arm1", schedtest.Arch("arm64"))
	c.AddNode("x1", schedtest.Arch("amd64"), schedtest.Resources("1", "1Gi"))
	c.NoPlatform["amd:1"] = legion.Platform{OS: "freebsd", Arch: "arm64"}
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 2
  pod: {containers: [{name: c, image: amd:1, resources: {requests: {cpu: 1}}}]}
`)
	c.Converge()
	// One task was rejected on arm1; from then on no task of the same
	// images goes to an arm64 node, and the one that has no room says why.
	rejected := 0
	for _, tk := range c.OwnerTasks("s") {
		if tk.Status.State == legion.TaskRejected {
			rejected++
			if tk.Status.WrongPlatform == nil || tk.Status.WrongPlatform.Arch != "arm64" {
				t.Fatalf("rejected task without its platform: %+v", tk.Status)
			}
		}
	}
	if rejected != 1 {
		t.Fatalf("%d rejected tasks, want exactly 1 (it learns from one)", rejected)
	}
	if diff := cmp.Diff(map[string]int{"x1": 1}, c.NodesOf("s")); diff != "" {
		t.Fatal(diff)
	}
	var msgs []string
	for _, tk := range c.Live("s") {
		if tk.Status.State == legion.TaskPending {
			msgs = append(msgs, tk.Status.Message)
		}
	}
	want := []string{"no node can run it: 1 node has no image for its platform freebsd/arm64, 1 node has too little cpu"}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
}

func TestPlatformConstraintAndLimitsNeedRacct(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNode("arm1", schedtest.Arch("arm64"))
	c.AddNode("x1", func(n *legion.Node) { n.Status.Platform.NoLimits = true })
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 1
  placement: {constraints: ["node.platform.arch == amd64"]}
  pod: {containers: [{name: c, image: s:1, resources: {limits: {memory: 1Gi}}}]}
`)
	c.Converge()
	live := c.Live("s")
	want := "no node can run it: 1 node cannot enforce limits (racct off), 1 node fails node.platform.arch == amd64"
	if len(live) != 1 || live[0].Status.Message != want {
		t.Fatalf("%v, want %q", describeTasks(live), want)
	}
}

// A node under memory pressure takes no new task that requests no memory
// (its agent would evict it first), but one that requests memory, and a
// global service's, as Kubernetes' memory-pressure taint spares
// DaemonSets'.
func TestMemoryPressureKeepsTasksWithoutRequestsOff(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNode("n1", func(n *legion.Node) { n.Status.MemoryPressure = true })
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: best}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: s:1}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: sized}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: s:1, resources: {requests: {memory: 64Mi}}}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: everywhere}
spec:
  mode: global
  pod: {containers: [{name: c, image: s:1}]}
`)
	c.Converge()
	live := c.Live("best")
	want := "no node can run it: 1 node is under memory pressure (it requests no memory)"
	if len(live) != 1 || live[0].Spec.Node != "" || live[0].Status.Message != want {
		t.Fatalf("best: %v, want pending with %q", describeTasks(live), want)
	}
	if diff := cmp.Diff(map[string]int{"n1": 1}, c.NodesOf("sized")); diff != "" {
		t.Errorf("a task requesting memory (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"n1": 1}, c.NodesOf("everywhere")); diff != "" {
		t.Errorf("a global service's task (-want +got):\n%s", diff)
	}
	// Once the pressure is over, the waiting task is placed.
	c.UpdateNode("n1", func(n *legion.Node) { n.Status.MemoryPressure = false })
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n1": 1}, c.NodesOf("best")); diff != "" {
		t.Errorf("after the pressure (-want +got):\n%s", diff)
	}
}

func TestLeastRequestedBreaksTies(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: big}
spec:
  replicas: 1
  placement: {constraints: ["node.name == n1"]}
  pod: {containers: [{name: c, image: b:1, resources: {requests: {cpu: 2}}}]}
`)
	c.Converge()
	c.ApplyAndConverge(strings.Replace(webYAML, "replicas: 3", "replicas: 1", 1))
	if diff := cmp.Diff(map[string]int{"n2": 1}, c.NodesOf("web")); diff != "" {
		t.Fatalf("least requested (-want +got):\n%s", diff)
	}
}

func TestPreferredAffinityAndAntiAffinity(t *testing.T) {
	t.Parallel()
	// Nodes tie on every other key, so without the terms the first name
	// (n1) would win: a on n2 draws "near" there, a on n1 sends "far" to n2.
	for _, tc := range []struct{ aOn, term, name string }{
		{"n2", "affinity", "near"},
		{"n1", "antiAffinity", "far"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := schedtest.WithNodes(t, 2)
			c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: a, labels: {app: a}}
spec:
  replicas: 1
  placement: {constraints: ["node.name == ` + tc.aOn + `"]}
  pod: {containers: [{name: c, image: a:1}]}
`)
			c.Converge()
			c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: ` + tc.name + `}
spec:
  replicas: 1
  placement: {` + tc.term + `: [{services: {app: a}}]}
  pod: {containers: [{name: c, image: b:1}]}
`)
			c.Converge()
			if diff := cmp.Diff(map[string]int{"n2": 1}, c.NodesOf(tc.name)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
