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

const webYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 3
  pod:
    containers:
      - name: web
        image: web:1
        resources: {requests: {cpu: 500m, memory: 256Mi}}
`

func TestReplicatedPlacesSlotsAndNamesTasks(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.ApplyAndConverge(webYAML)
	got := schedtest.SortedNames(c.Live("web"))
	if diff := cmp.Diff([]string{"web-1-1", "web-2-1", "web-3-1"}, got); diff != "" {
		t.Fatalf("tasks (-want +got):\n%s", diff)
	}
	// Fewest tasks of the service: one per node.
	if diff := cmp.Diff(map[string]int{"n1": 1, "n2": 1, "n3": 1}, c.NodesOf("web")); diff != "" {
		t.Fatalf("spread over nodes (-want +got):\n%s", diff)
	}
	for _, tk := range c.Live("web") {
		if tk.Metadata.Labels["legion.service"] != "web" {
			t.Errorf("task %s labels %v: want legion.service=web", tk.Metadata.Name, tk.Metadata.Labels)
		}
		if tk.Status.State != legion.TaskRunning || !tk.Status.Ready {
			t.Errorf("task %s is %s ready=%v", tk.Metadata.Name, tk.Status.State, tk.Status.Ready)
		}
	}
	s := c.Service("web")
	if s.Status.Replicas != 3 || s.Status.Running != 3 || s.Status.Ready != 3 {
		t.Errorf("status replicas/running/ready = %d/%d/%d, want 3/3/3", s.Status.Replicas, s.Status.Running, s.Status.Ready)
	}
	// Converged: a pass writes nothing.
	if r := c.Plan(); !r.Empty() {
		t.Fatalf("converged cluster still writes: %s", schedtest.Describe(r))
	}
}

func TestScaleDownStopsHighSlotsAndDropsTheirHistory(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.ApplyAndConverge(webYAML)
	c.ApplyAndConverge(strings.Replace(webYAML, "replicas: 3", "replicas: 1", 1))
	if got := schedtest.SortedNames(c.OwnerTasks("web")); !cmp.Equal(got, []string{"web-1-1"}) {
		t.Fatalf("after scaling to 1: tasks %v, want only web-1-1 (slots no longer wanted keep no history)", got)
	}
}

func TestPendingMessageNamesUnmetFiltersAndCounts(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNodes("hdd", 3, schedtest.Labels("disk", "hdd"))
	c.AddNode("d1", schedtest.Labels("disk", "ssd"))
	c.SetAvailability("d1", legion.AvailabilityDrain)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  replicas: 1
  placement: {constraints: ["node.labels.disk == ssd"]}
  pod: {containers: [{name: db, image: db:1}]}
`)
	c.Converge()
	tasks := c.Live("db")
	if len(tasks) != 1 {
		t.Fatalf("want one pending task, got %d", len(tasks))
	}
	want := "no node can run it: 3 nodes fail node.labels.disk == ssd, 1 node is draining"
	if tasks[0].Status.State != legion.TaskPending || tasks[0].Status.Message != want {
		t.Fatalf("task %s: %s %q, want pending %q", tasks[0].Metadata.Name, tasks[0].Status.State, tasks[0].Status.Message, want)
	}
	// Once a node fits, the pending task is placed.
	c.AddNode("ssd1", schedtest.Labels("disk", "ssd"))
	c.Converge()
	if got := c.NodesOf("db"); !cmp.Equal(got, map[string]int{"ssd1": 1}) {
		t.Fatalf("after adding ssd1: placement %v", got)
	}
}

func TestPendingForResources(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2, schedtest.Resources("1", "1Gi"))
	c.ApplyAndConverge(strings.Replace(webYAML, "replicas: 3", "replicas: 5", 1))
	if got := c.Running("web"); got != 4 {
		t.Fatalf("running %d, want 4 (two 500m tasks per 1-CPU node)", got)
	}
	var pending []*legion.Task
	for _, tk := range c.Live("web") {
		if tk.Status.State == legion.TaskPending {
			pending = append(pending, tk)
		}
	}
	if len(pending) != 1 || pending[0].Status.Message != "no node can run it: 2 nodes have too little cpu" {
		t.Fatalf("pending %v", describeTasks(pending))
	}
}

func describeTasks(ts []*legion.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Metadata.Name+" "+string(t.Status.State)+" "+t.Spec.Node+" "+t.Status.Message)
	}
	return out
}

// crashYAML is one replica of an image the tests make fail.
const crashYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: crash}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: crash:1}]}
`

func TestReplacementBackoffDoublesToTheCap(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(crashYAML)
	c.Converge()
	var gaps []time.Duration
	last := c.Now
	for i := 0; i < 9; i++ {
		live := c.Live("crash")
		if len(live) != 1 {
			t.Fatalf("round %d: %d live tasks", i, len(live))
		}
		name := live[0].Metadata.Name
		c.Fail(name, "exit status 1")
		failedAt := c.Now
		// Step one second at a time until a new task exists.
		for j := 0; j < 120; j++ {
			c.Advance(time.Second)
			c.Converge()
			if l := c.Live("crash"); len(l) == 1 && l[0].Metadata.Name != name {
				break
			}
		}
		gaps = append(gaps, c.Now.Sub(failedAt))
		last = c.Now
	}
	_ = last
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, gaps); diff != "" {
		t.Fatalf("restart delays (-want +got):\n%s", diff)
	}
	// History: 5 terminal tasks kept per slot.
	terminal := 0
	for _, tk := range c.OwnerTasks("crash") {
		if tk.Status.State.Terminal() {
			terminal++
		}
	}
	if terminal != 5 {
		t.Fatalf("history holds %d terminal tasks, want 5", terminal)
	}
}

func TestReplacementByRestartCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cond     string
		end      legion.TaskState
		replaced bool
	}{
		{"none", legion.TaskFailed, false},
		{"on-failure", legion.TaskFailed, true},
		{"on-failure", legion.TaskComplete, false},
		{"any", legion.TaskComplete, true},
		{"none", legion.TaskShutdown, true},
		{"none", legion.TaskOrphaned, true},
	} {
		t.Run(tc.cond+"/"+string(tc.end), func(t *testing.T) {
			c := schedtest.WithNodes(t, 1)
			c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: s}
spec:
  replicas: 1
  pod:
    restartPolicy: {condition: ` + tc.cond + `}
    containers: [{name: c, image: s:1}]
`)
			c.Converge()
			now := c.Now
			c.SetTask("s-1-1", func(tk *legion.Task) {
				tk.Status.State, tk.Status.Timestamp, tk.Status.Finished = tc.end, now, &now
			})
			c.Advance(5 * time.Second)
			c.Converge()
			got := len(c.Live("s")) == 1
			if got != tc.replaced {
				t.Fatalf("replaced = %v, want %v", got, tc.replaced)
			}
		})
	}
}

func TestUnstartableTaskIsNotReplacedUntilTheSpecChanges(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.FailImages["bad:1"] = "exec format error"
	c.Permanent["bad:1"] = true
	svc := `
apiVersion: legion/v1
kind: Service
metadata: {name: bad}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: IMAGE}]}
`
	c.Apply(strings.Replace(svc, "IMAGE", "bad:1", 1))
	c.Run(10 * time.Second)
	if n := len(c.OwnerTasks("bad")); n != 1 {
		t.Fatalf("%d tasks made, want 1: an unstartable task is not replaced", n)
	}
	msg := c.Service("bad").Status.Message
	if !strings.Contains(msg, "bad-1-1 failed as unstartable (exec format error): not started again until the spec changes") {
		t.Fatalf("service message %q does not say why", msg)
	}
	c.ApplyAndConverge(strings.Replace(svc, "IMAGE", "good:1", 1))
	if c.Running("bad") != 1 || c.Service("bad").Status.Message != "" {
		t.Fatalf("after the spec changed: running %d, message %q", c.Running("bad"), c.Service("bad").Status.Message)
	}
}

// failingService applies a Service of replicas tasks whose image fails
// to start with failure, on a cluster of nodes nodes, and runs the
// planner 10 s: the Service's message is then checked.
func failingService(t *testing.T, nodes, replicas int, failure string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, nodes)
	c.FailImages["bad:1"] = failure
	c.Apply(fmt.Sprintf(`
apiVersion: legion/v1
kind: Service
metadata: {name: bad}
spec:
  replicas: %d
  pod: {containers: [{name: c, image: bad:1}]}
`, replicas))
	c.Run(10 * time.Second)
	return c
}

func TestThreeFailedStartsOnDifferentNodesAreReported(t *testing.T) {
	t.Parallel()
	c := failingService(t, 3, 1, "mount failed")
	msg := c.Service("bad").Status.Message
	if !strings.Contains(msg, "slot 1 failed to start 3 times in a row, on nodes n1, n2, n3: mount failed") {
		t.Fatalf("service message %q", msg)
	}
}

// On a cluster of one node, the failed starts are reported too, naming
// that node: its Service says why none of its tasks runs.
func TestThreeFailedStartsOnOneNodeAreReported(t *testing.T) {
	t.Parallel()
	c := failingService(t, 1, 2, "pulling localhost/bad:1: image not present")
	msg := c.Service("bad").Status.Message
	if !strings.Contains(msg, "slot 1 failed to start 3 times in a row, on node n1: pulling localhost/bad:1: image not present") {
		t.Fatalf("service message %q", msg)
	}
	c.FailImages = map[string]string{}
	c.ApplyAndConverge(`
apiVersion: legion/v1
kind: Service
metadata: {name: bad}
spec:
  replicas: 2
  pod: {containers: [{name: c, image: bad:2}]}
`)
	if c.Running("bad") != 2 || c.Service("bad").Status.Message != "" {
		t.Fatalf("after the spec changed: running %d, message %q", c.Running("bad"), c.Service("bad").Status.Message)
	}
}

// A slot whose task failed to start on a node tries another node next,
// even one with more of the service's tasks: what failed may be the
// node's own (an image only loaded elsewhere). Before, the node with
// fewer tasks won every time and the slot never left it.
func TestAFailedStartTriesAnotherNodeFirst(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.FailNodes["n2"] = "pulling localhost/web:1: image not present"
	c.Apply(strings.Replace(webYAML, "replicas: 3", "replicas: 2", 1))
	c.Run(10 * time.Second)
	if got := c.NodesOf("web"); got["n1"] != 2 || c.Running("web") != 2 {
		t.Fatalf("running %d, by node %v: want both replicas on n1, which has the image", c.Running("web"), got)
	}
	failed := 0
	for _, tk := range c.OwnerTasks("web") {
		if tk.Status.State == legion.TaskFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed starts, want the one on n2 only", failed)
	}
}

func TestDeletedServiceTasksStopThenGo(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(webYAML)
	c.DeleteService("web")
	c.Plan()
	for _, tk := range c.OwnerTasks("web") {
		if tk.Spec.DesiredState != legion.TaskShutdown {
			t.Fatalf("task %s desired %s after its service went, want shutdown", tk.Metadata.Name, tk.Spec.DesiredState)
		}
	}
	c.Converge()
	if n := len(c.OwnerTasks("web")); n != 0 {
		t.Fatalf("%d tasks left after the service went", n)
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 5, schedtest.Labels("zone", "a"))
	c.Apply(webYAML)
	st := c.State()
	a := schedtestPlan(st, c.Now)
	// Shuffle the inputs: the output must not change.
	for i, j := 0, len(st.Nodes)-1; i < j; i, j = i+1, j-1 {
		st.Nodes[i], st.Nodes[j] = st.Nodes[j], st.Nodes[i]
	}
	b := schedtestPlan(st, c.Now)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same input, different plans:\n%s", diff)
	}
}

// A replica that exits 0 under restart policy none (or on-failure) has
// done its slot: the status counts it complete, and no task replaces it.
// Under any it is started again and counts nothing.
func TestCompletedSlotsAreCountedWhereTheRestartPolicyKeepsThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		condition string
		complete  int
	}{{"none", 1}, {"on-failure", 1}, {"any", 0}} {
		t.Run(tc.condition, func(t *testing.T) {
			c := schedtest.WithNodes(t, 1)
			c.ApplyAndConverge(strings.Replace(webYAML, "replicas: 3", "replicas: 2", 1) +
				"    restartPolicy: {condition: " + tc.condition + "}\n")
			now := c.Now
			c.SetTask("web-1-1", func(tk *legion.Task) {
				tk.Status.State, tk.Status.Ready, tk.Status.Timestamp, tk.Status.Finished = legion.TaskComplete, false, now, &now
			})
			c.Run(5 * time.Second)
			s := c.Service("web")
			if s.Status.Complete != tc.complete {
				t.Errorf("status complete %d, want %d", s.Status.Complete, tc.complete)
			}
			if again := c.Task("web-1-2") != nil; again != (tc.complete == 0) {
				t.Errorf("slot 1 started again: %v, want %v", again, tc.complete == 0)
			}
		})
	}
}
