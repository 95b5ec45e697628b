package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

func TestNamespaceUsedFollowsPlacedTasksAndVolumes(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(shop("2", 3, "web:1", "stop-first") + `
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data, namespace: shop}
spec: {size: 1Gi}
`)
	want := &legion.QuotaUsage{CPU: 1200, Tasks: 3, Volumes: 1, Storage: 1 << 30}
	if diff := cmp.Diff(want, c.Namespaces["shop"].Status.Used); diff != "" {
		t.Fatalf("used after 3 replicas (-want +got):\n%s", diff)
	}
	c.ApplyAndConverge(shop("2", 1, "web:1", "stop-first"))
	want.CPU, want.Tasks = 400, 1
	if diff := cmp.Diff(want, c.Namespaces["shop"].Status.Used); diff != "" {
		t.Fatalf("used after shrinking to 1 (-want +got):\n%s", diff)
	}
	if r := c.Plan(); len(r.UpdateNamespaces) != 0 {
		t.Fatalf("a settled namespace is written again: %+v", r.UpdateNamespaces[0].Status.Used)
	}
}

const rawYAML = `
apiVersion: legion/v1
kind: Namespace
metadata: {name: lab}
spec: {security: {allow: [ALLOW]}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: ping, namespace: lab}
spec:
  replicas: REPLICAS
  pod: {containers: [{name: c, image: ping:1, security: {allow: [rawSockets]}}]}
`

func TestTightenedNamespaceHoldsNewTasksPending(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(strings.NewReplacer("ALLOW", "rawSockets", "REPLICAS", "2").Replace(rawYAML))
	if n := placedCount(c.Live("ping")); n != 2 {
		t.Fatalf("placed %d of 2 while allowed", n)
	}
	// Tightened: what runs keeps running, a new task waits with the reason.
	c.ApplyAndConverge(strings.NewReplacer("[ALLOW]", "[]", "REPLICAS", "3").Replace(rawYAML))
	live := c.Live("ping")
	var pending []string
	for _, tk := range live {
		if tk.Spec.Placed == nil {
			pending = append(pending, tk.Status.Message)
		}
	}
	if placedCount(live) != 2 || len(pending) != 1 {
		t.Fatalf("after tightening: %d placed, pending %q", placedCount(live), pending)
	}
	if want := "not allowed in namespace lab"; !strings.Contains(pending[0], want) || !strings.Contains(pending[0], "security.allow: rawSockets") {
		t.Fatalf("pending reason %q does not name the setting", pending[0])
	}
}

func placedCount(ts []*legion.Task) int {
	n := 0
	for _, tk := range ts {
		if tk.Spec.Placed != nil {
			n++
		}
	}
	return n
}

func TestDemandCountsGlobalTasksPerEligibleNodeAndClaims(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t)
	c.AddNodes("ssd", 2, schedtest.Labels("disk", "ssd"))
	c.AddNodes("hdd", 3)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: agent, namespace: ops}
spec:
  mode: global
  placement: {constraints: ["node.labels.disk == ssd"]}
  pod: {containers: [{name: c, image: a:1, resources: {requests: {cpu: 100m, memory: 64Mi}}}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: db, namespace: ops}
spec:
  mode: stateful
  replicas: 3
  pod:
    containers: [{name: c, image: db:1, volumeMounts: [{name: data, path: /data}]}]
    volumes: [{name: data, claim: {size: 2Gi}}]
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data-db-0, namespace: ops}
spec: {size: 1Gi}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: spare, namespace: ops}
spec: {size: 1Gi}
`)
	st := c.State()
	got := scheduler.Demand("ops", &st)
	// 2 eligible nodes for the global service, 3 ordinals; the claim
	// Volumes of ordinals 0-2 at 2Gi (data-db-0 resized) and spare.
	want := legion.QuotaUsage{CPU: 200, Memory: 128 << 20, Tasks: 5, Volumes: 4, Storage: 7 << 30}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("demand (-want +got):\n%s", diff)
	}
}

// A Namespace tightened holds for specs admitted before: a task placed
// but not started yet is stopped, saying why, and its slot's next task
// waits pending; a Job's tasks alike, without counting a failure; a
// CronJob's run is skipped.
func TestTightenedNamespaceStopsTasksNotStartedAndSkipsCronRuns(t *testing.T) {
	t.Parallel()
	const extra = `
---
apiVersion: legion/v1
kind: Job
metadata: {name: once, namespace: lab}
spec: {pod: {containers: [{name: c, image: ping:1, security: {allow: [rawSockets]}}]}}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, namespace: lab}
spec:
  schedule: "*/5 * * * *"
  job: {pod: {containers: [{name: c, image: ping:1, security: {allow: [rawSockets]}}]}}
`
	c := schedtest.WithNodes(t, 2)
	c.Apply(strings.NewReplacer("ALLOW", "rawSockets", "REPLICAS", "2").Replace(rawYAML) + extra)
	c.Heartbeat()
	c.Plan() // placed, not started: no agent has acted yet
	if n := placedCount(c.Live("ping")); n != 2 {
		t.Fatalf("placed %d of 2 while allowed", n)
	}
	c.Apply(strings.NewReplacer("[ALLOW]", "[]", "REPLICAS", "2").Replace(rawYAML))
	c.Converge()
	stopped, pending := 0, 0
	for _, tk := range c.Tasks {
		if tk.Metadata.Namespace != "lab" {
			continue
		}
		switch {
		case tk.Spec.DesiredState == legion.TaskShutdown:
			if !strings.HasPrefix(tk.Spec.StopReason, "not started: not allowed in namespace lab") {
				t.Errorf("task %s stopped for %q, want the namespace's refusal", tk.Metadata.Name, tk.Spec.StopReason)
			}
			stopped++
		case tk.Spec.Placed == nil:
			if !strings.Contains(tk.Status.Message, "security.allow: rawSockets") {
				t.Errorf("task %s pending for %q, want the namespace's refusal", tk.Metadata.Name, tk.Status.Message)
			}
			pending++
		default:
			t.Errorf("task %s is %s on %s under the tightened namespace", tk.Metadata.Name, tk.Status.State, tk.Spec.Node)
		}
	}
	if stopped != 3 || pending != 3 {
		t.Errorf("%d tasks stopped and %d pending, want the service's two and the job's one each", stopped, pending)
	}
	if j := c.Jobs["lab/once"]; j.Status.State != legion.JobRunning || j.Status.Failed != 0 {
		t.Errorf("the job is %s with %d failed, want running with none: a stop is no failure", j.Status.State, j.Status.Failed)
	}
	c.Advance(5 * time.Minute)
	c.Converge()
	cj := c.CronJobs["lab/nightly"]
	if !strings.HasPrefix(cj.Status.Message, legion.CronJobSkipped) || !strings.Contains(cj.Status.Message, "not allowed in namespace lab") {
		t.Errorf("the cron job's message %q, want its run skipped for the namespace", cj.Status.Message)
	}
	for _, j := range c.Jobs {
		if j.Metadata.Labels["legion.cronjob"] == "nightly" {
			t.Errorf("job %s made under the tightened namespace", j.Metadata.Name)
		}
	}
}

// An autoscaled service counts at its autoscale.max, whatever it runs
// now, so admission holds the namespace to what it may scale to.
func TestDemandCountsAutoscaledServicesAtMax(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  autoscale: {min: 1, max: 10, cpu: 80}
  pod: {containers: [{name: c, image: web:1, resources: {requests: {cpu: 100m, memory: 64Mi}}}]}
`)
	st := c.State()
	st.Services[0].Status.Autoscale = &legion.AutoscaleStatus{Replicas: 3}
	got := scheduler.Demand("shop", &st)
	want := legion.QuotaUsage{CPU: 1000, Memory: 640 << 20, Tasks: 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("demand (-want +got):\n%s", diff)
	}
}
