package scheduler_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const shopYAML = `
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {quota: {cpu: "CPUQ", tasks: 10}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: REPLICAS
  update: {order: ORDER}
  pod: {containers: [{name: c, image: IMAGE, resources: {requests: {cpu: 400m}}}]}
`

func shop(cpu string, replicas int, image, order string) string {
	return strings.NewReplacer("CPUQ", cpu, "REPLICAS", strconv.Itoa(replicas), "IMAGE", image, "ORDER", order).Replace(shopYAML)
}

func shopTasks(c *schedtest.Cluster) (placed int, pending []string) {
	for _, tk := range c.Live("web") {
		if tk.Spec.Placed != nil {
			placed++
		} else {
			pending = append(pending, tk.Status.Message)
		}
	}
	return
}

func TestQuotaHoldsPlacement(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(shop("1", 3, "web:1", "stop-first"))
	placed, pending := shopTasks(c)
	if placed != 2 || len(pending) != 1 || pending[0] != "over the quota of namespace shop: cpu 1200m of 1" {
		t.Fatalf("placed %d, pending %q", placed, pending)
	}
}

func TestQuotaLoweredBelowUseStopsNothing(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(shop("2", 4, "web:1", "stop-first"))
	if placed, _ := shopTasks(c); placed != 4 {
		t.Fatalf("placed %d, want 4", placed)
	}
	c.ApplyAndConverge(shop("1", 4, "web:1", "stop-first"))
	if placed, pending := shopTasks(c); placed != 4 || len(pending) != 0 {
		t.Fatalf("a lowered quota stopped or held tasks: placed %d pending %q", placed, pending)
	}
	// Shrinking still goes through; growing again is held at the quota.
	c.ApplyAndConverge(shop("1", 1, "web:1", "stop-first"))
	if placed, _ := shopTasks(c); placed != 1 {
		t.Fatalf("after shrinking: placed %d", placed)
	}
	c.ApplyAndConverge(shop("1", 3, "web:1", "stop-first"))
	if placed, pending := shopTasks(c); placed != 2 || len(pending) != 1 {
		t.Fatalf("growing under the lowered quota: placed %d pending %q", placed, pending)
	}
}

func TestStartFirstUpdateNeedsRoomForOneMore(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(shop("800m", 2, "web:1", "start-first"))
	c.ApplyAndConverge(shop("800m", 2, "web:2", "start-first"))
	placed, pending := shopTasks(c)
	if placed != 2 || len(pending) != 1 || !strings.HasPrefix(pending[0], "over the quota of namespace shop: cpu 1200m of 800m") {
		t.Fatalf("placed %d pending %q", placed, pending)
	}
	for _, tk := range c.Live("web") {
		if tk.Spec.Placed != nil && tk.Spec.Pod.Containers[0].Image != "web:1" {
			t.Fatalf("a new task was placed beyond the quota")
		}
	}
	if u := c.Services["shop/web"].Status.Update; u.State != legion.UpdateUpdating {
		t.Fatalf("update %s", u.State)
	}
	// With room for the one task more that admission counts
	// (scheduler.UpdateSurge), the update goes through.
	c.Apply(shop("1200m", 2, "web:2", "start-first"))
	c.Run(time.Minute) // past each new task's monitor window
	placed, pending = shopTasks(c)
	if placed != 2 || len(pending) != 0 {
		t.Fatalf("with room for one more: placed %d pending %q", placed, pending)
	}
	for _, tk := range c.Live("web") {
		if img := tk.Spec.Pod.Containers[0].Image; img != "web:2" {
			t.Errorf("task %s still runs %s after the update", tk.Metadata.Name, img)
		}
	}
	if u := c.Services["shop/web"].Status.Update; u.State != legion.UpdateCompleted {
		t.Fatalf("update %s with room for one more", u.State)
	}
}

// A Job's tasks are not counted when it is applied, so under a quota of
// tasks its next task is made only while the namespace has room: made
// past it, each would wait as a pending Task, and Jobs of many
// completions would fill the store whatever the quota. The Job says why
// it runs fewer, and finishes as its tasks end.
func TestJobTasksAreMadeWithinTheQuota(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(`apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {quota: {tasks: 3}}
---
apiVersion: legion/v1
kind: Job
metadata: {name: batch, namespace: shop}
spec:
  completions: 8
  parallelism: 8
  pod: {containers: [{name: c, image: batch:1}]}
`)
	tasks := c.OwnerTasks("batch")
	if len(tasks) != 3 {
		t.Fatalf("%d tasks made of a Job under a quota of 3 tasks, want 3", len(tasks))
	}
	j := c.Jobs["shop/batch"]
	if want := "no more tasks made: namespace shop has 3 tasks not ended, as many as its quota of tasks allows"; !strings.Contains(j.Status.Message, want) {
		t.Fatalf("job message %q, want %q", j.Status.Message, want)
	}
	c.Run(2 * 60 * 1e9)
	if j := c.Jobs["shop/batch"]; j.Status.State != legion.JobComplete || j.Status.Succeeded != 8 {
		t.Fatalf("the Job under the quota: %+v, want complete with 8 succeeded", j.Status)
	}
}

// A Service past its namespace's quota of tasks (autoscaled up, or the
// quota lowered since it was applied) gets no task beyond it, pending or
// not, and says why.
func TestServiceTasksAreMadeWithinTheQuota(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(strings.Replace(shop("100", 5, "web:1", "stop-first"), "tasks: 10", "tasks: 3", 1))
	if got := len(c.OwnerTasks("web")); got != 3 {
		t.Fatalf("%d tasks made of a service of 5 under a quota of 3 tasks, want 3", got)
	}
	s := c.Services["shop/web"]
	if want := "no more tasks made: namespace shop has 3 tasks not ended, as many as its quota of tasks allows"; !strings.Contains(s.Status.Message, want) {
		t.Fatalf("service message %q, want %q", s.Status.Message, want)
	}
}
