package scheduler_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const updYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: app}
spec:
  replicas: 4
  pod:
    restartPolicy: {condition: RESTART}
    containers: [{name: app, image: IMAGE}]
  update: {parallelism: PAR, order: ORDER, failureAction: ACTION, delay: DELAY, MAXUNAVAIL}
`

func updSpec(image, order, action string, par int, delay string, maxUnavail string) string {
	r := strings.NewReplacer("IMAGE", image, "ORDER", order, "ACTION", action, "PAR", strconv.Itoa(par), "DELAY", delay,
		"RESTART", "any", ", MAXUNAVAIL", maxUnavail)
	return r.Replace(updYAML)
}

// updating is four nodes running app:1 with the given update settings
// (see updSpec), just told to update to app:2.
func updating(t *testing.T, order, action string, par int, delay string, maxUnavail string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(updSpec("app:1", order, action, par, delay, maxUnavail))
	c.Apply(updSpec("app:2", order, action, par, delay, maxUnavail))
	return c
}

func images(c *schedtest.Cluster, owner string) map[string]int {
	m := map[string]int{}
	for _, tk := range c.Live(owner) {
		m[tk.Spec.Pod.Containers[0].Image]++
	}
	return m
}

// watch runs the cluster second by second for d, calling check after each
// second.
func watch(c *schedtest.Cluster, d time.Duration, check func()) {
	end := c.Now.Add(d)
	for c.Now.Before(end) {
		c.Advance(time.Second)
		for i := 0; i < 50; i++ {
			changed := c.Step()
			check()
			if !changed {
				break
			}
		}
	}
}

func TestRollingUpdateStopFirstHonoursParallelismAndCompletes(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(updSpec("app:1", "stop-first", "pause", 1, "2s", ""))
	if u := c.Service("app").Status.Update; u != nil {
		t.Fatalf("first sight of a service is no update: %+v", u)
	}
	c.Apply(updSpec("app:2", "stop-first", "pause", 1, "2s", ""))
	c.Plan()
	if u := c.Service("app").Status.Update; u == nil || u.State != legion.UpdateUpdating || u.PreviousSpec == nil ||
		u.PreviousSpec.Pod.Containers[0].Image != "app:1" {
		t.Fatalf("update status after the pod changed: %+v", u)
	}
	watch(c, 60*time.Second, func() {
		// With parallelism 1, stop-first: at most one slot is without a
		// settled task at any time.
		notReady := 4 - c.Service("app").Status.Ready
		live := c.Live("app")
		if len(live) < 3 {
			t.Fatalf("at %s only %d live tasks: parallelism 1 allows one slot down", c.Now, len(live))
		}
		_ = notReady
	})
	if got := images(c, "app"); got["app:2"] != 4 || len(got) != 1 {
		t.Fatalf("after the update: images %v", got)
	}
	u := c.Service("app").Status.Update
	if u.State != legion.UpdateCompleted || u.Completed == nil {
		t.Fatalf("update state %s, want completed", u.State)
	}
}

func TestRollingUpdateStartFirstKeepsEveryReplica(t *testing.T) {
	t.Parallel()
	c := updating(t, "start-first", "pause", 2, "0s", "")
	maxLive := 0
	watch(c, 30*time.Second, func() {
		ready := 0
		for _, tk := range c.Live("app") {
			if tk.Status.Ready {
				ready++
			}
		}
		if ready < 4 {
			t.Fatalf("at %s only %d ready: start-first stops the old task once the new one is ready", c.Now, ready)
		}
		maxLive = max(maxLive, len(c.Live("app")))
	})
	if got := images(c, "app"); got["app:2"] != 4 || len(got) != 1 {
		t.Fatalf("after the update: images %v", got)
	}
	if maxLive > 6 {
		t.Fatalf("%d tasks at once: parallelism 2 surges at most 2", maxLive)
	}
	if s := c.Service("app").Status.Update.State; s != legion.UpdateCompleted {
		t.Fatalf("update %s", s)
	}
}

func TestUpdateDelayHoldsTheNextSlot(t *testing.T) {
	t.Parallel()
	c := updating(t, "stop-first", "pause", 1, "10s", "")
	c.Converge()
	if got := images(c, "app")["app:2"]; got != 1 {
		t.Fatalf("right after the update starts: %d new tasks, want 1", got)
	}
	c.Run(8 * time.Second)
	if got := images(c, "app")["app:2"]; got != 1 {
		t.Fatalf("8s in (delay 10s): %d new tasks, want still 1", got)
	}
	c.Run(3 * time.Second)
	if got := images(c, "app")["app:2"]; got != 2 {
		t.Fatalf("11s in: %d new tasks, want 2", got)
	}
}

func TestUpdateFailurePauses(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.FailImages["app:bad"] = "exit status 2"
	c.ApplyAndConverge(updSpec("app:1", "stop-first", "pause", 1, "0s", ""))
	c.Apply(updSpec("app:bad", "stop-first", "pause", 1, "0s", ""))
	c.Run(30 * time.Second)
	u := c.Service("app").Status.Update
	if u.State != legion.UpdatePaused || !strings.Contains(u.Message, "failed within the monitor window: exit status 2") {
		t.Fatalf("update %s %q, want paused with the failure", u.State, u.Message)
	}
	if got := images(c, "app")["app:1"]; got != 3 {
		t.Fatalf("paused update replaced more: %d old tasks left, want 3", got)
	}
}

func TestUpdateFailureContinues(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.FailImages["app:bad"] = "exit status 2"
	c.ApplyAndConverge(updSpec("app:1", "stop-first", "continue", 1, "0s", ""))
	c.Apply(updSpec("app:bad", "stop-first", "continue", 0, "0s", ""))
	c.Run(10 * time.Second)
	if got := images(c, "app")["app:1"]; got != 0 {
		t.Fatalf("continue: %d old tasks left, want the update to go on", got)
	}
	if s := c.Service("app").Status.Update.State; s != legion.UpdateUpdating {
		t.Fatalf("update %s, want still updating", s)
	}
}

func TestUpdateFailureRollsBack(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.FailImages["app:bad"] = "exit status 2"
	c.ApplyAndConverge(updSpec("app:1", "stop-first", "rollback", 1, "0s", ""))
	c.Apply(updSpec("app:bad", "stop-first", "rollback", 1, "0s", ""))
	c.Run(5 * time.Second)
	s := c.Service("app")
	if img := s.Spec.Pod.Containers[0].Image; img != "app:1" {
		t.Fatalf("rollback did not write the previous spec back: image %s", img)
	}
	c.Run(20 * time.Second)
	s = c.Service("app")
	if s.Status.Update.State != legion.UpdateRolledBack {
		t.Fatalf("update %s %q, want rolled-back", s.Status.Update.State, s.Status.Update.Message)
	}
	// Why it went back stays, so the update is known to have failed.
	if f := s.Status.Update.Failure; !strings.Contains(f, "failed within the monitor window") {
		t.Errorf("a rollback by the failure action: failure %q, want why the update failed", f)
	}
	if got := images(c, "app"); got["app:1"] != 4 || len(got) != 1 {
		t.Fatalf("after the rollback: %v", got)
	}
}

func TestManualRollbackDuringFailedUpdate(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.FailImages["app:bad"] = "exit status 2"
	spec := func(img string) string {
		return strings.Replace(updSpec(img, "stop-first", "pause", 1, "0s", ""), "condition: any", "condition: none", 1)
	}
	c.ApplyAndConverge(spec("app:1"))
	c.Apply(spec("app:bad"))
	c.Run(10 * time.Second)
	if s := c.Service("app").Status.Update.State; s != legion.UpdatePaused {
		t.Fatalf("update %s, want paused", s)
	}
	// legion rollback: the spec the update came from, written back.
	c.Apply(spec("app:1"))
	c.Plan()
	if s := c.Service("app").Status.Update.State; s != legion.UpdateRollingBack {
		t.Fatalf("after writing the previous spec back: %s, want rolling-back", s)
	}
	c.Run(20 * time.Second)
	// The slot whose task failed on the bad pod is refilled, though the
	// restart condition is none.
	if got := images(c, "app"); got["app:1"] != 4 {
		t.Fatalf("after the rollback: %v", got)
	}
	if u := c.Service("app").Status.Update; u.State != legion.UpdateRolledBack || u.Failure != "" {
		t.Fatalf("update %s (failure %q), want rolled-back as asked, with no failure", u.State, u.Failure)
	}
}

func TestRollbackPausedWhenRollbackFails(t *testing.T) {
	t.Parallel()
	c := updating(t, "stop-first", "pause", 4, "0s", "")
	c.Run(10 * time.Second)
	// The old image is gone from the registry: rolling back fails.
	c.FailImages["app:1"] = "no such image"
	c.Apply(updSpec("app:1", "stop-first", "pause", 1, "0s", ""))
	c.Run(10 * time.Second)
	if s := c.Service("app").Status.Update.State; s != legion.UpdateRollbackPaused {
		t.Fatalf("update %s, want rollback-paused", s)
	}
}

func TestNonPodChangeIsNoUpdate(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 4)
	c.ApplyAndConverge(updSpec("app:1", "stop-first", "pause", 1, "0s", ""))
	before := schedtest.SortedNames(c.Live("app"))
	c.ApplyAndConverge(updSpec("app:1", "start-first", "pause", 2, "5s", ""))
	if after := schedtest.SortedNames(c.Live("app")); strings.Join(before, ",") != strings.Join(after, ",") {
		t.Fatalf("update settings changed tasks: %v -> %v", before, after)
	}
	if u := c.Service("app").Status.Update; u != nil {
		t.Fatalf("no update expected: %+v", u)
	}
}

func TestFailureAfterTheMonitorWindowIsNoUpdateFailure(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	spec := func(img string) string {
		return strings.Replace(updSpec(img, "stop-first", "pause", 0, "0s", ""), "replicas: 4", "replicas: 2", 1)
	}
	c.ApplyAndConverge(spec("app:1"))
	c.Apply(spec("app:2"))
	c.Run(3 * time.Second)
	if s := c.Service("app").Status.Update.State; s != legion.UpdateUpdating {
		t.Fatalf("3s in: %s, want updating (monitor 5s)", s)
	}
	c.Run(3 * time.Second)
	if s := c.Service("app").Status.Update.State; s != legion.UpdateCompleted {
		t.Fatalf("past the monitor window: %s, want completed", s)
	}
	// A new task failing now, past its monitor window, is a plain failure.
	c.Fail(c.Live("app")[0].Metadata.Name, "exit status 1")
	c.Run(3 * time.Second)
	if s := c.Service("app").Status.Update.State; s != legion.UpdateCompleted {
		t.Fatalf("after a late failure: %s, want still completed", s)
	}
	if n := len(c.Live("app")); n != 2 {
		t.Fatalf("the failed slot was not refilled: %d live", n)
	}
}

func TestBackoffSetsNextWake(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.ApplyAndConverge(strings.Replace(updSpec("app:1", "stop-first", "pause", 1, "0s", ""), "replicas: 4", "replicas: 1", 1))
	for i := 0; i < 3; i++ {
		name := c.Live("app")[0].Metadata.Name
		c.Fail(name, "exit status 1")
		c.Run(time.Duration(1<<i) * time.Second)
	}
	failedAt := c.Now
	c.Fail(c.Live("app")[0].Metadata.Name, "exit status 1")
	c.Heartbeat()
	r := c.Plan()
	// The fourth failure in a row waits 8 s; the node's heartbeat deadline
	// (6 s) comes first, so look for both.
	if !r.NextWake.Equal(failedAt.Add(6*time.Second)) && !r.NextWake.Equal(failedAt.Add(8*time.Second)) {
		t.Fatalf("next wake %s after a failure at %s", r.NextWake, failedAt)
	}
	c.Advance(7 * time.Second)
	c.Heartbeat()
	if r := c.Plan(); !r.NextWake.Equal(failedAt.Add(8 * time.Second)) {
		t.Fatalf("next wake %s, want the backoff's end %s", r.NextWake, failedAt.Add(8*time.Second))
	}
}

func TestSlotLeftEmptyByAFailureHoldsNoUpdateBack(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	spec := func(img string) string {
		s := strings.Replace(updSpec(img, "stop-first", "pause", 1, "0s", ""), "replicas: 4", "replicas: 2", 1)
		return strings.Replace(s, "condition: any", "condition: none", 1)
	}
	c.ApplyAndConverge(spec("app:1"))
	c.Fail("app-1-1", "exit status 1") // condition none: slot 1 stays empty
	c.Run(2 * time.Second)
	c.Apply(spec("app:2"))
	c.Run(15 * time.Second)
	if got := images(c, "app"); got["app:2"] != 1 || len(got) != 1 {
		t.Fatalf("images %v, want slot 2 updated", got)
	}
	if s := c.Service("app").Status.Update.State; s != legion.UpdateCompleted {
		t.Fatalf("update %s, want completed: the empty slot holds nothing back", s)
	}
}

// A new task whose container the agent restarts within the monitor window
// sets off the failure action, though under a restart policy without a
// limit the task itself never fails.
func TestUpdateCrashLoopWithinMonitorRollsBack(t *testing.T) {
	t.Parallel()
	c := updating(t, "stop-first", "rollback", 1, "0s", "")
	c.Converge()
	var crashed *legion.Task
	for _, tk := range c.Live("app") {
		if tk.Spec.Pod.Containers[0].Image == "app:2" && tk.Status.State == legion.TaskRunning {
			crashed = tk
		}
	}
	if crashed == nil {
		t.Fatal("no running task of the update")
	}
	crashed.Status.Restarts = 1
	crashed.Status.Timestamp = crashed.Status.Started.Add(time.Second)
	crashed.Status.Message = "container app exited with 1: restarting in 1s (attempt 1)"
	c.Converge()
	s := c.Service("app")
	if s.Status.Update == nil || (s.Status.Update.State != legion.UpdateRollingBack && s.Status.Update.State != legion.UpdateRolledBack) {
		t.Fatalf("update %+v, want a rollback", s.Status.Update)
	}
	if s.Spec.Pod.Containers[0].Image != "app:1" {
		t.Fatalf("spec image %s after the crash loop, want the previous app:1", s.Spec.Pod.Containers[0].Image)
	}
	if want := "task " + crashed.Metadata.Name + " had its containers restarted within the monitor window: container app exited with 1: restarting in 1s"; !strings.Contains(s.Status.Update.Message, want) {
		t.Fatalf("update message %q should say what failed", s.Status.Update.Message)
	}
}
