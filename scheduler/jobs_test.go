package scheduler_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const jobYAML = `
apiVersion: legion/v1
kind: Job
metadata: {name: batch}
spec:
  completions: 3
  parallelism: 2
  backoffLimit: LIMIT
  pod: {containers: [{name: c, image: batch:1}]}
`

// jobSpec is the batch job with backoffLimit limit.
func jobSpec(limit string) string { return strings.Replace(jobYAML, "LIMIT", limit, 1) }

// singleJob is the batch job with backoffLimit limit and one completion.
func singleJob(limit string) string {
	return strings.Replace(jobSpec(limit), "completions: 3\n  parallelism: 2", "completions: 1", 1)
}

// withJobRunTime is a cluster of nodes nodes whose jobs' tasks complete
// after running for d.
func withJobRunTime(t *testing.T, nodes int, d time.Duration) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, nodes)
	c.JobRunTime = d
	return c
}

func TestJobRunsCompletionSlotsWithParallelism(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(jobSpec("6"))
	maxActive := 0
	watch(c, 30*time.Second, func() {
		maxActive = max(maxActive, len(c.Live("batch")))
	})
	if maxActive != 2 {
		t.Fatalf("at most %d tasks at once, want parallelism 2", maxActive)
	}
	j := c.Job("batch")
	if j.Status.State != legion.JobComplete || j.Status.Succeeded != 3 || j.Status.Finished == nil || j.Status.Started == nil {
		t.Fatalf("job status %+v", j.Status)
	}
	for _, tk := range c.OwnerTasks("batch") {
		if !tk.Spec.Job || tk.Metadata.Labels["legion.job"] != "batch" {
			t.Fatalf("task %s: job %v labels %v", tk.Metadata.Name, tk.Spec.Job, tk.Metadata.Labels)
		}
	}
	// A finished job keeps its tasks.
	if n := len(c.OwnerTasks("batch")); n != 3 {
		t.Fatalf("%d tasks kept, want 3", n)
	}
}

func TestJobRetriesWithBackoffThenFails(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, 0)
	c.FailJobs["batch"] = true
	c.Apply(singleJob("3"))
	var starts []time.Time
	seen := map[string]bool{}
	said := map[string]bool{}
	watch(c, 3*time.Minute, func() {
		for _, tk := range c.OwnerTasks("batch") {
			if !seen[tk.Metadata.Name] {
				seen[tk.Metadata.Name] = true
				starts = append(starts, c.Now)
			}
		}
		said[c.Job("batch").Status.Message] = true
	})
	// Between tries, with no task running, the Job says what it waits for.
	first := c.Task("batch-1-1")
	want1 := "task batch-1-1 failed (exit status 1): the next try starts at " +
		first.Status.Finished.Add(10*time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
	if !said[want1] {
		t.Errorf("the job never said %q while it waited; it said %q", want1, slices.Collect(maps.Keys(said)))
	}
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}
	if diff := cmp.Diff(want, gaps); diff != "" {
		t.Fatalf("retry delays (-want +got):\n%s", diff)
	}
	j := c.Job("batch")
	if j.Status.State != legion.JobFailed || j.Status.Failed != 4 ||
		j.Status.Message != "4 tasks failed, more than its backoffLimit of 3; the last, batch-1-4: exit status 1" {
		t.Fatalf("job status %+v", j.Status)
	}
}

// A task restarting in place never fails: its containers' restarts
// count against the backoff limit, as Kubernetes counts them, or a crash
// loop under restart condition on-failure would run for ever.
func TestJobRestartsCountAgainstTheBackoffLimit(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, time.Hour)
	c.Apply(strings.Replace(singleJob("2"), "image: batch:1}]}", "image: batch:1}], restartPolicy: {condition: on-failure}}", 1))
	c.Converge()
	live := c.Live("batch")
	if len(live) != 1 || live[0].Status.State != legion.TaskRunning {
		t.Fatalf("live tasks %v, want one running", live)
	}
	name := live[0].Metadata.Name
	restart := func(n int) {
		t.Helper()
		now := c.Now
		c.SetTask(name, func(tk *legion.Task) {
			tk.Status.Restarts, tk.Status.Timestamp = n, now
			tk.Status.Message = "container c exited with 3: restarting in 4s (attempt " + strconv.Itoa(n+1) + ")"
		})
		c.Converge()
	}
	restart(2)
	if j := c.Job("batch"); j.Status.State != legion.JobRunning {
		t.Fatalf("after 2 restarts, at the limit of 2: %+v", j.Status)
	}
	restart(3)
	j := c.Job("batch")
	want := "containers of running tasks restarted 3 times, more than its backoffLimit of 2; the last, " + name +
		" (restarted 3 times): container c exited with 3"
	if j.Status.State != legion.JobFailed || j.Status.Message != want {
		t.Fatalf("after 3 restarts: %+v, want failed: %q", j.Status, want)
	}
	if n := len(c.Live("batch")); n != 0 {
		t.Fatalf("%d tasks still running after the job failed", n)
	}
	// The task it stopped for its restarts counts as failed, as
	// Kubernetes counts its pod, once stopped too.
	c.Converge()
	if j := c.Job("batch"); j.Status.Failed != 1 {
		t.Errorf("the job failed by a task's restarts counts %d failed tasks, want 1", j.Status.Failed)
	}

	// A task that restarted and runs again says nothing of why: the
	// message is what was counted.
	again := strings.Replace(singleJob("0"), "name: batch", "name: again", 1)
	c.Apply(strings.Replace(again, "image: batch:1}]}", "image: batch:1}], restartPolicy: {condition: on-failure}}", 1))
	c.Converge()
	if live = c.Live("again"); len(live) != 1 {
		t.Fatalf("live tasks %v of the second job, want one", live)
	}
	name = live[0].Metadata.Name
	c.SetTask(name, func(tk *legion.Task) { tk.Status.Restarts, tk.Status.Message = 1, "" })
	c.Converge()
	want = "a running task's container restarted once, more than its backoffLimit of 0; the last, " + name + " (restarted once)"
	if j := c.Job("again"); j.Status.State != legion.JobFailed || j.Status.Message != want {
		t.Fatalf("after a restart: %+v, want failed: %q", j.Status, want)
	}
	// When its containers' status says how the last run ended, so does
	// the Job.
	third := strings.Replace(singleJob("0"), "name: batch", "name: third", 1)
	c.Apply(strings.Replace(third, "image: batch:1}]}", "image: batch:1}], restartPolicy: {condition: on-failure}}", 1))
	c.Converge()
	name = c.Live("third")[0].Metadata.Name
	c.SetTask(name, func(tk *legion.Task) {
		tk.Status.Restarts, tk.Status.Message = 1, ""
		tk.Status.Containers = []legion.ContainerStatus{{Name: "c", State: "running", Restarts: 1, Message: "exited with 3"}}
	})
	c.Converge()
	want = "a running task's container restarted once, more than its backoffLimit of 0; the last, " + name + " (restarted once): container c exited with 3"
	if j := c.Job("third"); j.Status.State != legion.JobFailed || j.Status.Message != want {
		t.Fatalf("after a restart its container's status tells of: %+v, want failed: %q", j.Status, want)
	}
}

func TestJobActiveDeadline(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, time.Hour)
	c.Apply(strings.Replace(jobSpec("6"), "backoffLimit: 6", "backoffLimit: 6\n  activeDeadline: 30s", 1))
	c.Run(29 * time.Second)
	if s := c.Job("batch").Status.State; s != legion.JobRunning {
		t.Fatalf("before the deadline: %s", s)
	}
	c.Run(2 * time.Second)
	j := c.Job("batch")
	if j.Status.State != legion.JobFailed || j.Status.Message != "ran past its activeDeadline of 30s" {
		t.Fatalf("after the deadline: %+v", j.Status)
	}
	if n := len(c.Live("batch")); n != 0 {
		t.Fatalf("%d tasks still running after the job failed", n)
	}
}

func TestGlobalJobCompletesOnEveryNode(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(globalJob)
	c.Run(10 * time.Second)
	j := c.Job("sweep")
	if j.Status.State != legion.JobComplete || j.Status.Succeeded != 3 {
		t.Fatalf("global job %+v", j.Status)
	}
}

func TestJobTaskMovedByDrainIsRetriedWithoutCounting(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 2, time.Minute)
	c.ApplyAndConverge(singleJob("0"))
	node := c.Live("batch")[0].Spec.Node
	c.SetAvailability(node, legion.AvailabilityDrain)
	c.Converge()
	live := c.Live("batch")
	if len(live) != 1 || live[0].Spec.Node == node {
		t.Fatalf("after draining %s: %v", node, describeTasks(live))
	}
	if j := c.Job("batch"); j.Status.Failed != 0 || j.Status.State != legion.JobRunning {
		t.Fatalf("a drain counted as a failure: %+v", j.Status)
	}
}

// A task that failed as unstartable would fail the same way again: it is
// not retried, and the Job, which can then never finish, fails at once
// (backoffLimit 6 left alone) rather than running with nothing running.
func TestJobWithAnUnstartableTaskFails(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 2, time.Hour)
	c.FailImages["batch:1"] = "no command"
	c.Permanent["batch:1"] = true
	c.Apply(singleJob("6"))
	c.Run(2 * time.Minute)
	tasks := c.OwnerTasks("batch")
	if len(tasks) != 1 {
		t.Fatalf("%d tasks, want 1: an unstartable task is not retried", len(tasks))
	}
	j := c.Job("batch").Status
	if j.State != legion.JobFailed || j.Message != "task batch-1-1 failed as unstartable: no command" || j.Finished == nil {
		t.Fatalf("job %s, finished %v, message %q; want failed, naming the task and why", j.State, j.Finished, j.Message)
	}
	if d := tasks[0].Spec.DesiredState; d != legion.TaskShutdown {
		t.Fatalf("the failed task is desired %s, want shutdown: nothing runs it again", d)
	}

	// One unstartable slot among several: the Job fails and its running
	// tasks are stopped.
	c = withJobRunTime(t, 2, time.Hour)
	c.Apply(jobSpec("6"))
	c.Converge()
	running := c.Live("batch")
	if len(running) != 2 {
		t.Fatalf("%d tasks running, want 2 (parallelism)", len(running))
	}
	failUnstartable(c, running[0].Metadata.Name, "exec format error")
	c.Converge()
	j = c.Job("batch").Status
	if j.State != legion.JobFailed || !strings.Contains(j.Message, "failed as unstartable: exec format error") {
		t.Fatalf("job %s %q, want failed as unstartable", j.State, j.Message)
	}
	if live := c.Live("batch"); len(live) != 0 {
		t.Fatalf("a failed job still runs %v", describeTasks(live))
	}
}

// failUnstartable fails a running task as the agent does one that cannot
// start (jail.ErrPermanent).
func failUnstartable(c *schedtest.Cluster, task, msg string) {
	c.Fail(task, msg)
	c.SetTask(task, func(t *legion.Task) { t.Status.Permanent = true })
}

// A global Job fails on an unstartable task in the slot of a node that
// may run it; a task that was unstartable on a node the Job no longer
// runs on holds nothing.
func TestGlobalJobWithAnUnstartableTask(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 2, time.Hour)
	c.FailImages["sweep:1"] = "no command"
	c.Permanent["sweep:1"] = true
	c.Apply(globalJob)
	c.Run(time.Minute)
	if j := c.Job("sweep").Status; j.State != legion.JobFailed || !strings.Contains(j.Message, "failed as unstartable: no command") {
		t.Fatalf("global job %s %q, want failed as unstartable", j.State, j.Message)
	}

	// The node of the unstartable task is paused before the planner sees
	// the failure: its slot is no longer the Job's to run, and the Job
	// completes with the other node's.
	c = withJobRunTime(t, 2, time.Minute)
	c.Apply(strings.Replace(globalJob, "sweep:1", "sweep:2", 1))
	c.Converge()
	live := c.Live("sweep")
	if len(live) != 2 {
		t.Fatalf("%d tasks running, want one per node", len(live))
	}
	failUnstartable(c, live[1].Metadata.Name, "no command")
	c.SetAvailability(live[1].Spec.Node, legion.AvailabilityPause)
	c.Run(2 * time.Minute)
	if j := c.Job("sweep").Status; j.State != legion.JobComplete {
		t.Fatalf("global job %s %q, want complete: the paused node's slot holds nothing", j.State, j.Message)
	}
}

const globalJob = `
apiVersion: legion/v1
kind: Job
metadata: {name: sweep}
spec:
  mode: global
  pod: {containers: [{name: c, image: sweep:1}]}
`

// A CronJob whose Job failed as unstartable runs again at its next time
// under concurrencyPolicy forbid: a Job left running would hold every
// run after it.
func TestCronJobForbidRunsAfterAnUnstartableJob(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, time.Hour)
	c.FailImages["n:1"] = "no command"
	c.Permanent["n:1"] = true
	c.Apply(cronSpec("concurrencyPolicy: forbid"))
	c.Plan()
	nextRun(c)
	first := cronJobNames(c)
	if len(first) != 1 {
		t.Fatalf("jobs %v, want one run", first)
	}
	if j := c.Jobs["default/"+first[0]]; j.Status.State != legion.JobFailed {
		t.Fatalf("job %s %s %q, want failed", first[0], j.Status.State, j.Status.Message)
	}
	nextRun(c)
	want := "nightly-" + minutes(c.Now)
	if ls := c.CronJobs["default/nightly"].Status.LastSchedule; ls == nil || !ls.Equal(c.Now) {
		t.Fatalf("lastSchedule %v after the next run time, want %s; cron job says %q", ls, c.Now, c.CronJobs["default/nightly"].Status.Message)
	}
	// failedJobsHistoryLimit 1: the second failed run is the one kept.
	if got := cronJobNames(c); !cmp.Equal(got, []string{want}) {
		t.Fatalf("jobs %v, want [%s]: the second run, the first one trimmed", got, want)
	}
}

func TestGlobalJobSlotGoesWithADrainedNode(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 2, time.Minute)
	c.Apply(globalJob)
	c.Converge()
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Run(2 * time.Minute)
	j := c.Job("sweep")
	if j.Status.State != legion.JobComplete || j.Status.Succeeded != 1 || j.Status.Failed != 0 {
		t.Fatalf("global job after draining n1: %+v, want complete on n2 alone", j.Status)
	}
}
