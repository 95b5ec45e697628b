package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// execProbe checks every 10ms through the runtime's exec, which the test
// answers; one result in either direction is a transition.
func execProbe() *legion.Probe {
	return &legion.Probe{Exec: &legion.ExecProbe{Command: []string{"/bin/check"}},
		Period: legion.Duration(10 * time.Millisecond), FailureThreshold: 1, SuccessThreshold: 1}
}

// A container's readiness probe decides the task's reported ready: not
// ready until it passes, ready when it does, not ready again (with the
// probe's reason) when it fails.
func TestAgentReadinessProbe(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Spec.Pod.Containers[0].Probes.Readiness = execProbe()
	r.rt.setExec("t1-main", 1)
	r.start(t)
	r.assign(nil, task)

	st, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the task running", isState(legion.TaskRunning, ""))
	if st.Ready {
		t.Error("reported ready before its readiness probe passed")
	}
	r.rt.setExec("t1-main", 0)
	_, seen = r.mgr.awaitAfter(t, seen, "web-t1", "the task ready", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskRunning && s.Ready && s.Message == ""
	})
	r.rt.setExec("t1-main", 1)
	st, _ = r.mgr.awaitAfter(t, seen, "web-t1", "the task not ready", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskRunning && !s.Ready
	})
	if want := `container main not ready: exec ["/bin/check"]: exit code 1, expected 0`; st.Message != want {
		t.Errorf("not ready message %q, want %q", st.Message, want)
	}
	if n := r.rt.startCount("t1-main"); n != 1 {
		t.Errorf("a failing readiness probe restarted the container: %d starts", n)
	}
}

// A failed liveness probe stops the container, and the restart policy
// starts it again.
func TestAgentLivenessProbeRestarts(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Spec.Pod.Containers[0].Probes.Liveness = execProbe()
	r.start(t)
	r.assign(nil, task)
	_, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the task running", isState(legion.TaskRunning, ""))

	r.rt.setExec("t1-main", 7)
	st, seen := r.mgr.awaitAfter(t, seen, "web-t1", "the liveness failure", func(s legion.TaskStatus) bool {
		return strings.HasPrefix(s.Message, "container main liveness probe failed: ")
	})
	if st.State != legion.TaskRunning || st.Ready || !strings.Contains(st.Message, "exit code 7") {
		t.Errorf("liveness failure reported as %s ready=%v %q", st.State, st.Ready, st.Message)
	}
	const msg = "container main was stopped by its failed liveness probe (exited with 143): restarting in 1s (attempt 1)"
	_, seen = r.mgr.awaitAfter(t, seen, "web-t1", "the restart pending", isState(legion.TaskRunning, msg))
	r.rt.setExec("t1-main", 0)
	r.clock.advance(time.Second)
	st, _ = r.mgr.awaitAfter(t, seen, "web-t1", "the restart", isState(legion.TaskRunning, ""))
	if st.Restarts != 1 || r.rt.startCount("t1-main") != 2 {
		t.Errorf("after the restart: %d restarts reported, %d starts", st.Restarts, r.rt.startCount("t1-main"))
	}
}

// A container stopped by its failed liveness probe has failed, even when
// it exits 0 on the TERM (as servers shutting down cleanly do): under
// restartPolicy on-failure it starts again, under none the task fails
// saying why. It never reads as completed.
func TestAgentLivenessFailureIsAFailureWhateverTheExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cond legion.RestartCondition
		want legion.TaskStatus
	}{
		{legion.RestartOnFailure, legion.TaskStatus{State: legion.TaskRunning,
			Message: "container main was stopped by its failed liveness probe (exited with 0): restarting in 1s (attempt 1)"}},
		{legion.RestartNone, legion.TaskStatus{State: legion.TaskFailed,
			Message: "container main was stopped by its failed liveness probe (exited with 0), and its restart policy is none"}},
	} {
		t.Run(string(tc.cond), func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			task := testTask("t1")
			task.Spec.Pod.RestartPolicy = &legion.RestartPolicy{Condition: tc.cond}
			task.Spec.Pod.Containers[0].Command = sh("trap 'exit 0' TERM; sleep 30 & wait")
			task.Spec.Pod.Containers[0].Probes.Liveness = execProbe()
			r.start(t)
			r.assign(nil, task)
			_, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the task running", isState(legion.TaskRunning, ""))
			r.rt.setExec("t1-main", 7)
			_, seen = r.mgr.awaitAfter(t, seen, "web-t1", "the liveness failure", func(s legion.TaskStatus) bool {
				return strings.HasPrefix(s.Message, "container main liveness probe failed: ")
			})
			st, _ := r.mgr.awaitAfter(t, seen, "web-t1", "what follows the stop", func(s legion.TaskStatus) bool {
				return !strings.HasPrefix(s.Message, "container main liveness probe failed: ")
			})
			if st.State != tc.want.State || st.Message != tc.want.Message {
				t.Errorf("after the stop: %s %q, want %s %q", st.State, st.Message, tc.want.State, tc.want.Message)
			}
		})
	}
}

// An exec probe's command reads $(NAME) as the container's command does,
// from the pod's variables and the env given as values, and not from
// Secrets or Configs: a probe's command shows in the task's message when
// it fails.
func TestAgentExecProbeExpandsStaticEnv(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := filesTask()
	c := &task.Spec.Pod.Containers[0]
	c.Env = append(c.Env, legion.EnvVar{Name: "PORT", Value: "8080"}, legion.EnvVar{Name: "ADDR", Value: "$(LEGION_POD_IP):$(PORT)"})
	p := execProbe()
	p.Exec.Command = []string{"/bin/check", "$(ADDR)", "$(HOSTNAME)", "$(TOKEN)", "$(MODE)", "$(PLAIN)", "$$(PORT)", "$(NONE)"}
	c.Probes.Readiness = p
	r.start(t)
	r.assign(filesValues(), task)
	_, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the task ready", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskRunning && s.Ready
	})
	r.rt.setExec("t1-main", 1) // a failure reports the command run
	st, _ := r.mgr.awaitAfter(t, seen, "web-t1", "the probe's failure", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskRunning && strings.Contains(s.Message, "exec [")
	})
	if st.IP == "" {
		t.Fatalf("the running task reports no address: %+v", st)
	}
	want := `exec ["/bin/check" "` + st.IP + `:8080" "web-t1" "$(TOKEN)" "$(MODE)" "x-$(TOKEN)" "$(PORT)" "$(NONE)"]`
	if !strings.Contains(st.Message, want) {
		t.Errorf("message %q, want it to hold %s", st.Message, want)
	}
	if strings.Contains(st.Message, "s3cret") || strings.Contains(st.Message, "fast") {
		t.Errorf("a Secret's or Config's value in the probe's command: %q", st.Message)
	}
}
