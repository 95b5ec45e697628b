package scheduler_test

import (
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

// desired is each of the owner's tasks' desired and current state, by
// name.
func desired(c *schedtest.Cluster, owner string) map[string][2]legion.TaskState {
	out := map[string][2]legion.TaskState{}
	for _, tk := range c.OwnerTasks(owner) {
		out[tk.Metadata.Name] = [2]legion.TaskState{tk.Spec.DesiredState, tk.Status.State}
	}
	return out
}

// A failed task is wanted running until its slot has a replacement; from
// then on its history says shutdown, its status untouched.
func TestAReplacedTaskIsToldToShutDown(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(crashYAML)
	c.Converge()
	c.Fail("crash-1-1", "exit status 1")
	failed := *c.Task("crash-1-1")
	c.Converge() // within the restart delay: no replacement yet
	if got := c.Task("crash-1-1").Spec.DesiredState; got != legion.TaskRunning || len(c.OwnerTasks("crash")) != 1 {
		t.Fatalf("before its replacement: desired %s with %d tasks, want running and 1", got, len(c.OwnerTasks("crash")))
	}
	c.Advance(time.Second)
	c.Converge()
	want := map[string][2]legion.TaskState{
		"crash-1-1": {legion.TaskShutdown, legion.TaskFailed},
		"crash-1-2": {legion.TaskRunning, legion.TaskRunning},
	}
	if got := desired(c, "crash"); !equalStates(got, want) {
		t.Fatalf("after the replacement: %v, want %v", got, want)
	}
	old := c.Task("crash-1-1")
	if old.Status.Message != failed.Status.Message || !old.Status.Timestamp.Equal(failed.Status.Timestamp) {
		t.Fatalf("the replaced task's status changed: %+v, was %+v", old.Status, failed.Status)
	}
	// Said once: the next passes write nothing more.
	c.Advance(time.Second)
	if r := c.Plan(); len(r.UpdateTasks) != 0 {
		t.Fatalf("a pass after it rewrote %d tasks", len(r.UpdateTasks))
	}
}

// A task its agent reported orphaned (the pod gone with a restart of the
// node) is replaced at once, and its history says shutdown.
func TestAnAgentOrphanedTaskIsToldToShutDownWhenReplaced(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(webYAML)
	c.Converge()
	now := c.Now
	c.SetTask("web-2-1", func(tk *legion.Task) {
		tk.Status.State, tk.Status.Ready, tk.Status.Timestamp, tk.Status.Finished = legion.TaskOrphaned, false, now, &now
		tk.Status.Message = "its pod was gone when the node's agent started"
	})
	c.Converge()
	got := desired(c, "web")
	if got["web-2-1"] != [2]legion.TaskState{legion.TaskShutdown, legion.TaskOrphaned} ||
		got["web-2-2"] != [2]legion.TaskState{legion.TaskRunning, legion.TaskRunning} {
		t.Fatalf("tasks: %v, want web-2-1 shutdown/orphaned and web-2-2 running/running", got)
	}
}

// History written before replaced tasks were told to shut down is put
// right by the next pass, once.
func TestOlderHistoryIsToldToShutDown(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(webYAML)
	c.Converge()
	c.Fail("web-1-1", "exit status 1")
	c.Advance(time.Second)
	c.Converge()
	// As an older planner left it.
	c.SetTask("web-1-1", func(tk *legion.Task) { tk.Spec.DesiredState = legion.TaskRunning })
	r := c.Plan()
	if len(r.UpdateTasks) != 1 || r.UpdateTasks[0].Metadata.Name != "web-1-1" || r.UpdateTasks[0].Spec.DesiredState != legion.TaskShutdown {
		t.Fatalf("the pass wrote %d tasks, want web-1-1 told to shut down: %v", len(r.UpdateTasks), r.UpdateTasks)
	}
	if r := c.Plan(); len(r.UpdateTasks) != 0 {
		t.Fatalf("the pass after it rewrote %d tasks", len(r.UpdateTasks))
	}
}

// A Job's failed tries are told to shut down as they are retried, and
// every task of a Job that is over, the last failure included.
func TestAJobsEndedTasksAreToldToShutDown(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, 0)
	c.FailJobs["batch"] = true
	c.Apply(singleJob("1"))
	c.Converge()
	c.Advance(10 * time.Second)
	c.Converge()
	if got := desired(c, "batch"); got["batch-1-1"] != [2]legion.TaskState{legion.TaskShutdown, legion.TaskFailed} {
		t.Fatalf("after the retry: %v, want batch-1-1 shutdown/failed", got)
	}
	c.Advance(20 * time.Second)
	c.Converge()
	if st := c.Job("batch").Status.State; st != legion.JobFailed {
		t.Fatalf("job %s, want failed", st)
	}
	for name, ds := range desired(c, "batch") {
		if ds != [2]legion.TaskState{legion.TaskShutdown, legion.TaskFailed} {
			t.Fatalf("%s of a failed job: desired %s, state %s; want shutdown, failed", name, ds[0], ds[1])
		}
	}
}

func equalStates(a, b map[string][2]legion.TaskState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A Job's completed tasks are desired complete, not running.
func TestAJobsCompletedTasksAreDesiredComplete(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 2, 0)
	c.Apply(jobSpec("1"))
	c.Run(10 * time.Second)
	if st := c.Job("batch").Status; st.State != legion.JobComplete || st.Succeeded != 3 {
		t.Fatalf("job %+v, want complete with 3 succeeded", st)
	}
	for name, ds := range desired(c, "batch") {
		if ds != [2]legion.TaskState{legion.TaskComplete, legion.TaskComplete} {
			t.Fatalf("%s: desired %s, state %s; want complete, complete", name, ds[0], ds[1])
		}
	}
	if r := c.Plan(); len(r.UpdateTasks) != 0 {
		t.Fatalf("a pass after it rewrote %d tasks", len(r.UpdateTasks))
	}
}
