package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const scaleYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: api}
spec:
  replicas: 2
  autoscale: {min: 1, max: 10, cpu: 50, downDelay: 1m}
  pod: {containers: [{name: c, image: api:1, resources: {requests: {cpu: "1"}}}]}
`

// report spreads a load of total millicores over api's running tasks,
// each reporting its share now from its own node (or from node
// "elsewhere" when wrongNode).
func report(c *schedtest.Cluster, total int64, wrongNode bool) {
	c.Usage = nil
	running := 0
	for _, tk := range c.Live("api") {
		if tk.Status.State == legion.TaskRunning {
			running++
		}
	}
	if running == 0 {
		return
	}
	cpu := total / int64(running)
	for _, tk := range c.Live("api") {
		if tk.Status.State != legion.TaskRunning {
			continue
		}
		node := tk.Spec.Node
		if wrongNode {
			node = "elsewhere"
		}
		c.Usage = append(c.Usage, legion.Usage{Namespace: "default", Task: tk.Metadata.Name, Node: node,
			Time: c.Now, CPU: legion.CPU(cpu)})
	}
}

func runReporting(c *schedtest.Cluster, d time.Duration, cpu int64) {
	end := c.Now.Add(d)
	for c.Now.Before(end) {
		report(c, cpu, false)
		c.Converge()
		c.Advance(time.Second)
	}
	report(c, cpu, false)
	c.Converge()
}

func TestAutoscaleGrowsAtOnce(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(scaleYAML)
	report(c, 1800, false) // 90% of each request, target 50%: ceil(180/50) = 4
	c.Converge()
	if got := c.Service("api").Status.Autoscale.Replicas; got != 4 {
		t.Fatalf("autoscale replicas %d, want 4", got)
	}
	if n := len(c.Live("api")); n != 4 {
		t.Fatalf("%d tasks, want 4", n)
	}
}

func TestAutoscaleDeadBand(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(scaleYAML)
	runReporting(c, 2*time.Minute, 1080) // 54%: within a tenth of 50
	if n := len(c.Live("api")); n != 2 {
		t.Fatalf("%d tasks, want 2: within the dead band nothing changes", n)
	}
	runReporting(c, 5*time.Second, 1120) // 56%: outside; ceil(112/50) = 3
	if n := len(c.Live("api")); n != 3 {
		t.Fatalf("%d tasks, want 3", n)
	}
}

func TestAutoscaleShrinksOnlyAfterDownDelay(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(strings.Replace(scaleYAML, "replicas: 2", "replicas: 4", 1))
	runReporting(c, 50*time.Second, 400) // 10%: wants 1
	if n := len(c.Live("api")); n != 4 {
		t.Fatalf("50s of low use: %d tasks, want still 4 (downDelay 1m)", n)
	}
	runReporting(c, 15*time.Second, 400)
	if n := len(c.Live("api")); n != 1 {
		t.Fatalf("past downDelay: %d tasks, want 1", n)
	}
}

// Tasks that use nothing at all (0m, as idle processes report) want no
// replicas: the service shrinks to its minimum, not stays where it is.
func TestAutoscaleIdleShrinksToTheMinimum(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(strings.Replace(scaleYAML, "replicas: 2", "replicas: 4", 1))
	runReporting(c, 65*time.Second, 0)
	if n := len(c.Live("api")); n != 1 {
		t.Fatalf("idle past downDelay: %d tasks, want the minimum, 1", n)
	}
}

func TestAutoscaleNewLeaderWaitsBeforeShrinking(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(strings.Replace(scaleYAML, "replicas: 2", "replicas: 4", 1))
	c.LeaderSince = c.Now
	svc := c.Service("api")
	svc.Status.Autoscale.Recommendations = nil // a new leader's view
	runReporting(c, 50*time.Second, 400)
	if n := len(c.Live("api")); n != 4 {
		t.Fatalf("new leader shrank within downDelay: %d tasks", n)
	}
	if msg := c.Service("api").Status.Autoscale.Message; msg == "" {
		t.Fatalf("autoscale status does not say why it waits")
	}
	runReporting(c, 15*time.Second, 400)
	if n := len(c.Live("api")); n != 1 {
		t.Fatalf("after downDelay: %d tasks, want 1", n)
	}
}

func TestAutoscaleIgnoresReportsFromOtherNodesAndMissingOnesAreIdle(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(scaleYAML)
	report(c, 4000, true)
	c.Converge()
	if n := len(c.Live("api")); n != 2 {
		t.Fatalf("reports from the wrong node grew it to %d", n)
	}
	// One task reports 90%, the other nothing: idle for growing, so
	// ceil(90/50) = 2: no growth.
	report(c, 1800, false)
	c.Usage = c.Usage[:1]
	c.Converge()
	if n := len(c.Live("api")); n != 2 {
		t.Fatalf("a missing report counted as busy: %d tasks", n)
	}
}
