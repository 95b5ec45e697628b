package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const depDBYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  pod: {containers: [{name: db, image: db:1}]}
`

// dependentWeb is a two-replica web service depending on dep with cond.
func dependentWeb(dep, cond string) string {
	return `
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 2
  dependsOn: [{service: ` + dep + `, condition: ` + cond + `}]
  pod: {containers: [{name: web, image: web:1}]}
`
}

// webWaiting asserts web has two tasks, all pending and unplaced with msg.
func webWaiting(t *testing.T, c *schedtest.Cluster, msg string) {
	t.Helper()
	tasks := c.Live("web")
	if len(tasks) != 2 {
		t.Fatalf("web has %d live tasks, want 2 pending", len(tasks))
	}
	for _, tk := range tasks {
		if tk.Status.State != legion.TaskPending || tk.Spec.Placed != nil || tk.Status.Message != msg {
			t.Errorf("task %s: %s placed=%v message %q, want pending, unplaced, %q", tk.Metadata.Name, tk.Status.State, tk.Spec.Placed != nil, tk.Status.Message, msg)
		}
	}
}

func TestDependsOnHoldsFirstTasksUntilTheConditionHolds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(c *schedtest.Cluster) // before web is applied
		web     string
		waiting string
		release func(c *schedtest.Cluster)
	}{{
		name: "ready",
		setup: func(c *schedtest.Cluster) {
			c.Ready = false
			c.ApplyAndConverge(depDBYAML)
		},
		web:     dependentWeb("db", "ready"),
		waiting: "waiting for db to be ready",
		release: func(c *schedtest.Cluster) {
			c.Ready = true
			c.SetTask(c.Live("db")[0].Metadata.Name, func(tk *legion.Task) { tk.Status.Ready = true })
			c.Converge()
		},
	}, {
		name: "started",
		setup: func(c *schedtest.Cluster) {
			c.FailImages = map[string]string{"db:1": "pull refused"}
			c.ApplyAndConverge(depDBYAML)
		},
		web:     dependentWeb("db", "started"),
		waiting: "waiting for db to start",
		release: func(c *schedtest.Cluster) {
			c.FailImages = nil
			c.Run(time.Minute)
		},
	}, {
		name: "completed job",
		setup: func(c *schedtest.Cluster) {
			c.JobRunTime = 30 * time.Second
			c.ApplyAndConverge(`
apiVersion: legion/v1
kind: Job
metadata: {name: migrate}
spec:
  pod: {containers: [{name: m, image: migrate:1}]}
`)
		},
		web:     dependentWeb("migrate", "completed"),
		waiting: "waiting for migrate to complete successfully",
		release: func(c *schedtest.Cluster) { c.Run(time.Minute) },
	}, {
		name:    "missing service",
		setup:   func(c *schedtest.Cluster) {},
		web:     dependentWeb("db", "started"),
		waiting: "waiting for db: no service db in namespace default yet",
		release: func(c *schedtest.Cluster) { c.ApplyAndConverge(depDBYAML) },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := schedtest.WithNodes(t, 2)
			tt.setup(c)
			c.ApplyAndConverge(tt.web)
			c.Run(10 * time.Second) // waiting is no timer: time changes nothing
			webWaiting(t, c, tt.waiting)
			if s := c.Service("web"); s.Status.Running != 0 {
				t.Errorf("web status running = %d while waiting", s.Status.Running)
			}
			tt.release(c)
			if n := c.Running("web"); n != 2 {
				t.Fatalf("web runs %d tasks once the condition holds, want 2; tasks: %v", n, schedtest.SortedNames(c.OwnerTasks("web")))
			}
			for _, tk := range c.Live("web") {
				if tk.Status.Message != "" && strings.HasPrefix(tk.Status.Message, "waiting for") {
					t.Errorf("task %s still says %q", tk.Metadata.Name, tk.Status.Message)
				}
			}
		})
	}
}

// Once a service has run, its updates and replacements no longer wait for
// its dependencies (compose waits on the first start only).
func TestDependsOnWaitsOnTheFirstDeployOnly(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(depDBYAML)
	c.ApplyAndConverge(dependentWeb("db", "ready"))
	if n := c.Running("web"); n != 2 {
		t.Fatalf("web runs %d tasks with db ready, want 2", n)
	}
	// db goes unready; an update of web starts new tasks all the same.
	c.Ready = false
	c.SetTask(c.Live("db")[0].Metadata.Name, func(tk *legion.Task) { tk.Status.Ready = false })
	c.Ready = true
	c.ApplyAndConverge(strings.Replace(dependentWeb("db", "ready"), "web:1", "web:2", 1))
	c.Run(2 * time.Minute)
	live := c.Live("web")
	if len(live) != 2 {
		t.Fatalf("web has %d live tasks after the update, want 2", len(live))
	}
	for _, tk := range live {
		if tk.Spec.Pod.Containers[0].Image != "web:2" || tk.Status.State != legion.TaskRunning {
			t.Errorf("task %s runs %s, %s (%q): want web:2 running", tk.Metadata.Name, tk.Spec.Pod.Containers[0].Image, tk.Status.State, tk.Status.Message)
		}
	}
	if db := c.Live("db"); len(db) != 1 || db[0].Status.Ready {
		t.Fatalf("db should have stayed unready through the update: %+v", db)
	}
}
