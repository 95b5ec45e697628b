package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail"
)

// An assigned task is prepared, its pod made (infra container first, then
// init and main containers), the init container run to its end before the
// main ones start, and each step reported until it runs.
func TestAgentRunsAssignedTask(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Spec.Pod.InitContainers = []legion.Container{{Name: "setup", Image: "example/tools:1", Command: sh("exit 0")}}
	task.Spec.Pod.Containers = append(task.Spec.Pod.Containers, legion.Container{Name: "side", Image: "example/web:1"})
	r.start(t)
	r.assign(nil, task)

	st := r.mgr.await(t, "web-t1", "the task running", isState(legion.TaskRunning, ""))

	var states []string
	for _, s := range r.mgr.of("web-t1") {
		states = append(states, string(s.State)+": "+s.Message)
	}
	want := []string{"preparing: pulling images", "starting: creating the pod",
		"starting: running init container setup", "running: "}
	if !slices.Equal(states, want) {
		t.Errorf("reports: %q, want %q", states, want)
	}
	if got, want := r.rt.createdIDs(), []string{"t1", "t1-setup", "t1-main", "t1-side"}; !slices.Equal(got, want) {
		t.Errorf("created %q, want %q", got, want)
	}
	if got, want := r.rt.started(), []string{"t1-setup", "t1-main", "t1-side"}; !slices.Equal(got, want) {
		t.Errorf("started %q, want %q", got, want)
	}
	// One pull per image, whatever the number of containers running it.
	if got, want := r.images.pulled(), []string{"example/tools:1", "example/web:1"}; !slices.Equal(got, want) {
		t.Errorf("pulled %q, want %q", got, want)
	}
	if st.IP != testIP || st.Started == nil || !st.Ready || st.Manifests["example/web:1"] != "sha256:m-example/web:1" {
		t.Errorf("running status: ip %q started %v ready %v manifests %v", st.IP, st.Started, st.Ready, st.Manifests)
	}
	if ip, ok := r.agent.PodIP("t1"); !ok || ip != testIP {
		t.Errorf("PodIP: %q, %v", ip, ok)
	}
	for _, id := range []string{"t1-main", "t1-side"} {
		cs, err := r.rt.Inspect(context.Background(), id)
		if err != nil || cs.State != jail.StateRunning {
			t.Errorf("%s: %v, %v", id, cs.State, err)
		}
		if cs.Pod != "t1" || cs.Labels[LabelNode] != testNode || cs.Labels[LabelTask] != "t1" {
			t.Errorf("%s: pod %q labels %v", id, cs.Pod, cs.Labels)
		}
	}
	for _, s := range r.rt.created() {
		if s.ID == "t1-main" && !slices.Contains(s.Env, "LEGION_POD_IP="+testIP) {
			t.Errorf("main's env %q lacks the pod's address", s.Env)
		}
	}
}

// Tasks that are not this node's to run, or not to run at all, are left
// alone: nothing is pulled or created for them.
func TestAgentRunsOnlyItsRunningTasks(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	other := testTask("other")
	other.Spec.Node = "n2"
	down := testTask("down")
	down.Spec.DesiredState = legion.TaskShutdown
	done := testTask("done")
	done.Status.State = legion.TaskComplete
	mine := testTask("mine")
	r.start(t)
	r.assign(nil, other, down, done, mine)
	r.mgr.await(t, "web-mine", "the node's task running", isState(legion.TaskRunning, ""))
	if got := r.rt.createdIDs(); !slices.Equal(got, []string{"mine", "mine-main"}) {
		t.Errorf("created %q: only the node's running task should be", got)
	}
	for _, name := range []string{"web-other", "web-down", "web-done"} {
		if sts := r.mgr.of(name); len(sts) > 0 {
			t.Errorf("%s reported: %s", name, describe(sts))
		}
	}
}

// A task placed on the node and told to stop before the agent ever saw it
// wanted running (stopped in the same set, as after a scale up then down)
// is reported shut down, "stopped before it ran", with nothing made for
// it: otherwise no worker would ever report it and it would read assigned
// for good. A task never placed is the planner's to end, not the node's.
func TestAgentReportsATaskStoppedBeforeItWasSeen(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	placed := time.Now()
	gone := testTask("gone")
	gone.Spec.Placed, gone.Spec.DesiredState, gone.Status.State = &placed, legion.TaskShutdown, legion.TaskAssigned
	unplaced := testTask("unplaced")
	unplaced.Spec.DesiredState = legion.TaskShutdown
	mine := testTask("mine")
	r.start(t)
	r.assign(nil, gone, unplaced, mine)
	st := r.mgr.await(t, "web-gone", "the stopped task reported", func(s legion.TaskStatus) bool { return s.State.Terminal() })
	if st.State != legion.TaskShutdown || st.Message != "stopped before it ran" || st.Finished == nil || st.Ready {
		t.Errorf("reported %s %q finished %v ready %v, want shutdown, stopped before it ran", st.State, st.Message, st.Finished, st.Ready)
	}
	r.mgr.await(t, "web-mine", "the node's task running", isState(legion.TaskRunning, ""))
	if got := r.rt.createdIDs(); !slices.Equal(got, []string{"mine", "mine-main"}) {
		t.Errorf("created %q for a task told to stop", got)
	}
	if sts := r.mgr.of("web-unplaced"); len(sts) > 0 {
		t.Errorf("a task never placed was reported: %s", describe(sts))
	}

	// A task whose worker ended (failed) is that worker's to report: a set
	// older than its report, showing it assigned and told to stop, does
	// not make it "stopped before it ran".
	failing := testTask("failing")
	failing.Spec.Placed, failing.Status.State = &placed, legion.TaskAssigned
	r.rt.mu.Lock()
	r.rt.failOn["failing-main"] = errors.New("no such image")
	r.rt.mu.Unlock()
	r.assign(nil, failing, mine)
	r.mgr.await(t, "web-failing", "the failure reported", func(s legion.TaskStatus) bool { return s.State == legion.TaskFailed })
	stale := *failing
	stale.Spec.DesiredState = legion.TaskShutdown
	later := testTask("later")
	r.assign(nil, &stale, mine)
	r.assign(nil, &stale, mine, later)
	r.mgr.await(t, "web-later", "a later set's task running", isState(legion.TaskRunning, ""))
	if sts := r.mgr.of("web-failing"); slices.ContainsFunc(sts, isState(legion.TaskShutdown, "stopped before it ran")) {
		t.Errorf("a failed task's end was said again from an older set: %s", describe(sts))
	}
}

// awaitGone waits for the task's pod and files to go. The directory goes
// after the pod (its volumes are let go of in between), so the wait is for
// both: a pod gone does not mean the teardown is over.
func awaitGone(t *testing.T, r *rig, uid string) {
	t.Helper()
	dirGone := func() error {
		if _, err := os.Stat(r.agent.taskDir(uid)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("task directory of %s left: %v", uid, err)
		}
		return nil
	}
	waitFor(t, "the pod of "+uid+" and its directory removed", func() bool { return r.podGone(uid) && dirGone() == nil },
		func() string {
			cs, err := r.rt.List(context.Background(), nil)
			return fmt.Sprintf("containers %v (%v); %v", cs, err, dirGone())
		})
	if !slices.Contains(r.net.detaches(), uid) {
		t.Errorf("the pod of %s was not detached from the network", uid)
	}
	if _, ok := r.agent.PodIP(uid); ok {
		t.Errorf("the pod of %s keeps its address", uid)
	}
}

// A task whose desired state becomes shutdown leaves the endpoints first
// (reported not ready, draining), then its pod is stopped and removed and
// it is reported shut down.
func TestAgentShutsDownTask(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	r.start(t)
	r.assign(nil, task)
	r.mgr.await(t, "web-t1", "the task running", isState(legion.TaskRunning, ""))

	down := testTask("t1")
	down.Spec.DesiredState = legion.TaskShutdown
	down.Status.State = legion.TaskRunning
	r.assign(nil, down)
	st := r.mgr.await(t, "web-t1", "the task shut down", isState(legion.TaskShutdown, "stopped"))
	if st.Finished == nil || st.Ready {
		t.Errorf("shutdown status: finished %v ready %v", st.Finished, st.Ready)
	}
	sts := r.mgr.of("web-t1")
	drain := slices.IndexFunc(sts, isState(legion.TaskRunning, drainingMessage))
	if drain < 0 || sts[drain].Ready || drain > slices.IndexFunc(sts, isState(legion.TaskShutdown, "stopped")) {
		t.Errorf("no drain reported (not ready) before the shutdown: %s", describe(sts))
	}
	awaitGone(t, r, "t1")
}

// A task no longer among the node's assignments is stopped and removed;
// a job is not drained, as it serves no endpoints.
func TestAgentRemovesUnassignedTask(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	keep, gone := testTask("keep"), testTask("gone")
	gone.Spec.Job = true
	r.start(t)
	r.assign(nil, keep, gone)
	r.mgr.await(t, "web-gone", "the job running", isState(legion.TaskRunning, ""))
	r.mgr.await(t, "web-keep", "the kept task running", isState(legion.TaskRunning, ""))

	r.assign(nil, keep)
	r.mgr.await(t, "web-gone", "the job shut down", isState(legion.TaskShutdown, "stopped"))
	if sts := r.mgr.of("web-gone"); slices.ContainsFunc(sts, isState(legion.TaskRunning, drainingMessage)) {
		t.Errorf("a job was drained: %s", describe(sts))
	}
	awaitGone(t, r, "gone")
	if r.podGone("keep") {
		t.Error("the task still assigned lost its pod")
	}
	if sts := r.mgr.of("web-keep"); sts[len(sts)-1].State != legion.TaskRunning {
		t.Errorf("the kept task: %s", describe(sts))
	}
}

// A container that ends is started again after a delay that doubles with
// each failure in a row, up to MaxRestartDelay, and falls back to the
// first delay once a run lasted StableRun.
func TestAgentRestartBackoff(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Spec.Pod.RestartPolicy = &legion.RestartPolicy{Condition: legion.RestartAny, Delay: legion.Duration(16 * time.Second)}
	r.start(t)
	r.assign(nil, task)
	_, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the task running", isState(legion.TaskRunning, ""))

	ctx := context.Background()
	for i, wait := range []string{"16s", "32s", "1m0s", "1m0s", "reset"} {
		if wait == "reset" {
			r.clock.advance(StableRun)
			wait = "16s"
		}
		// The container is ended by a TERM it does not trap: exit 143.
		if err := r.rt.Stop(ctx, "t1-main", time.Second); err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("container main exited with 143: restarting in %s (attempt %d)", wait, i+1)
		var st legion.TaskStatus
		st, seen = r.mgr.awaitAfter(t, seen, "web-t1", msg, isState(legion.TaskRunning, msg))
		if st.Ready || st.Restarts != i {
			t.Errorf("restart pending: ready %v restarts %d, want false, %d", st.Ready, st.Restarts, i)
		}
		// Each container's state says the same, and how its run ended.
		pending := []legion.ContainerStatus{{Name: "main", State: "waiting", Restarts: i, Message: "exited with 143"}}
		if diff := cmp.Diff(pending, st.Containers); diff != "" {
			t.Errorf("containers while a restart is due (-want +got):\n%s", diff)
		}
		d, err := time.ParseDuration(wait)
		if err != nil {
			t.Fatal(err)
		}
		r.clock.advance(d)
		st, seen = r.mgr.awaitAfter(t, seen, "web-t1", "the restart", isState(legion.TaskRunning, ""))
		if st.Restarts != i+1 || !st.Ready {
			t.Errorf("restarted: restarts %d ready %v, want %d, true", st.Restarts, st.Ready, i+1)
		}
		running := []legion.ContainerStatus{{Name: "main", State: "running", Ready: true, Restarts: i + 1, Message: "exited with 143"}}
		if diff := cmp.Diff(running, st.Containers); diff != "" {
			t.Errorf("containers once restarted (-want +got):\n%s", diff)
		}
		if n := r.rt.startCount("t1-main"); n != i+2 {
			t.Errorf("main started %d times, want %d", n, i+2)
		}
	}
}

// The restart policy decides how a task whose container ends finishes:
// complete or failed with the exit code, or failed once the restarts
// allowed are spent.
func TestAgentRestartPolicyEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		script   string
		policy   legion.RestartPolicy
		restarts int
		state    legion.TaskState
		msg      string
		code     int // -1: none reported
	}{
		{"success is not restarted on failure", "exit 0", legion.RestartPolicy{Condition: legion.RestartOnFailure}, 0,
			legion.TaskComplete, "", 0},
		{"never restarted", "exit 3", legion.RestartPolicy{Condition: legion.RestartNone}, 0,
			legion.TaskFailed, "container main exited with 3", 3},
		{"restarts exhausted", "exit 3", legion.RestartPolicy{Condition: legion.RestartOnFailure, MaxAttempts: 2}, 2,
			legion.TaskFailed, "container main exited with 3; restart policy exhausted after 2 attempts", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			task := testTask("t1")
			task.Spec.Pod.Containers[0].Command = sh(tc.script)
			task.Spec.Pod.RestartPolicy = &tc.policy
			r.start(t)
			r.assign(nil, task)
			// Each restart waits for the clock: move it on until the task ends.
			var st legion.TaskStatus
			waitFor(t, "the task ended", func() bool {
				sts := r.mgr.of("web-t1")
				if len(sts) > 0 && sts[len(sts)-1].State.Terminal() {
					st = sts[len(sts)-1]
					return true
				}
				r.clock.advance(time.Minute)
				return false
			}, func() string { return describe(r.mgr.of("web-t1")) })
			if st.State != tc.state || st.Message != tc.msg || st.Restarts != tc.restarts {
				t.Errorf("ended %s %q after %d restarts, want %s %q after %d", st.State, st.Message, st.Restarts, tc.state, tc.msg, tc.restarts)
			}
			if tc.code >= 0 && (st.ExitCode == nil || *st.ExitCode != tc.code) {
				t.Errorf("exit code %v, want %d", st.ExitCode, tc.code)
			}
			if n := r.rt.startCount("t1-main"); n != tc.restarts+1 {
				t.Errorf("main started %d times, want %d", n, tc.restarts+1)
			}
			awaitGone(t, r, "t1")
		})
	}
}

// A task that cannot start fails with a message saying what went wrong,
// permanent only when waiting cannot fix it, and leaves nothing behind.
func TestAgentReportsStartFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		setup     func(r *rig, task *legion.Task)
		msg       string
		permanent bool
	}{
		{"image pull", func(r *rig, task *legion.Task) {
			r.images.fail = map[string]error{"example/web:1": errors.New("registry.example: 401 Unauthorized")}
		}, "pulling example/web:1: registry.example: 401 Unauthorized", false},
		{"pinned image pull", func(r *rig, task *legion.Task) {
			task.Spec.Images = map[string]string{"example/web:1": "sha256:abc"}
			r.images.fail = map[string]error{"example/web:1@sha256:abc": errors.New("manifest unknown")}
		}, "pulling example/web:1@sha256:abc: manifest unknown", false},
		{"pod create", func(r *rig, task *legion.Task) {
			r.rt.failOn["t1"] = errors.New("jail t1: no free jail ids")
		}, "creating the pod: jail t1: no free jail ids", false},
		{"container create", func(r *rig, task *legion.Task) {
			r.rt.failOn["t1-main"] = fmt.Errorf("jail t1-main: %w: allow.mlock needs a 14.1 kernel", jail.ErrPermanent)
		}, "container main: allow.mlock needs a 14.1 kernel", true},
		{"no command", func(r *rig, task *legion.Task) {
			r.images.cmd = nil
		}, "container main: the image names no command and the pod gives none", true},
		{"container start", func(r *rig, task *legion.Task) {
			task.Spec.Pod.Containers[0].Command = []string{"/usr/local/bin/web"}
		}, "container main: /usr/local/bin/web: no such file or directory", true},
		{"init container start", func(r *rig, task *legion.Task) {
			task.Spec.Pod.InitContainers = []legion.Container{{Name: "migrate", Image: "example/web:1", Command: []string{"/usr/local/bin/migrate"}}}
		}, "init container migrate: /usr/local/bin/migrate: no such file or directory", true},
		{"init container", func(r *rig, task *legion.Task) {
			task.Spec.Pod.InitContainers = []legion.Container{{Name: "migrate", Image: "example/web:1", Command: sh("exit 4")}}
		}, "init container migrate exited with 4", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			task := testTask("t1")
			tc.setup(r, task)
			r.start(t)
			r.assign(nil, task)
			st := r.mgr.await(t, "web-t1", "the task failed", func(s legion.TaskStatus) bool { return s.State.Terminal() })
			if st.State != legion.TaskFailed || st.Message != tc.msg || st.Permanent != tc.permanent {
				t.Errorf("ended %s %q permanent %v, want failed %q permanent %v", st.State, st.Message, st.Permanent, tc.msg, tc.permanent)
			}
			if slices.ContainsFunc(r.mgr.of("web-t1"), func(s legion.TaskStatus) bool { return s.State == legion.TaskRunning }) {
				t.Error("a task that never started was reported running")
			}
			waitFor(t, "nothing left of the task", func() bool { return r.podGone("t1") },
				func() string { return fmt.Sprint(r.rt.List(context.Background(), nil)) })
			if _, err := os.Stat(r.agent.taskDir("t1")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("task directory left: %v", err)
			}
		})
	}
}

// A task's last report that no manager takes (no leader at that moment,
// say) is sent again with the next assignment set that still shows the
// task unfinished, and not after one that shows it ended: otherwise the
// store would show it running for good with nothing behind it.
func TestAnEndedTasksLastReportIsSentAgainUntilTaken(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	r.start(t)
	r.assign(nil, task)
	r.mgr.await(t, "web-t1", "running", isState(legion.TaskRunning, ""))
	r.mgr.mu.Lock()
	r.mgr.refuseFinal = 1
	r.mgr.mu.Unlock()
	down := testTask("t1")
	down.Spec.DesiredState = legion.TaskShutdown
	down.Status.State = legion.TaskRunning
	r.assign(nil, down)
	awaitGone(t, r, "t1")
	waitFor(t, "the refused last report", func() bool {
		r.mgr.mu.Lock()
		defer r.mgr.mu.Unlock()
		return r.mgr.refuseFinal == 0
	}, func() string { return describe(r.mgr.of("web-t1")) })
	if sts := r.mgr.of("web-t1"); sts[len(sts)-1].State.Terminal() {
		t.Fatalf("a refused report was recorded: %s", describe(sts))
	}
	// The store still shows it running: the next set sends it again.
	r.assign(nil, down)
	st := r.mgr.await(t, "web-t1", "the last status sent again", func(st legion.TaskStatus) bool { return st.State == legion.TaskShutdown })
	if st.Finished == nil {
		t.Errorf("the status sent again lost its end time: %+v", st)
	}
	// Once a set shows it ended, nothing more is sent.
	n := len(r.mgr.of("web-t1"))
	ended := testTask("t1")
	ended.Spec.DesiredState = legion.TaskShutdown
	ended.Status = st
	r.assign(nil, ended)
	r.assign(nil, ended) // the agent has taken the first set once it reads the second
	r.assign(nil)
	waitFor(t, "the sets taken", func() bool { return len(r.mgr.ch) == 0 }, func() string { return "" })
	if got := len(r.mgr.of("web-t1")); got != n {
		t.Errorf("reports after the set showing the task ended: %s", describe(r.mgr.of("web-t1")[n:]))
	}
}

// runRefused starts a task whose reports of any unfinished state the
// manager refuses (with refusal, or as no manager took them when nil),
// and waits for its running report to be refused once; it returns how
// many of those were refused so far. The worker's supervision ticks only
// when the test says (rig.supervised).
func runRefused(t *testing.T, refusal error) (*rig, func() int) {
	t.Helper()
	r := newRig(t)
	r.agent.superviseTicks = make(chan time.Time)
	r.mgr.mu.Lock()
	r.mgr.refuseUnfinished, r.mgr.refusal = true, refusal
	r.mgr.mu.Unlock()
	r.start(t)
	r.assign(nil, testTask("t1"))
	running := func() int { return r.mgr.refusedIn(legion.TaskRunning) }
	waitFor(t, "the running report refused", func() bool { return running() == 1 }, r.mgr.describeRefused)
	return r, running
}

// supervised has the agent's one worker handle a whole supervision tick
// at the fake clock's time: the second of two ticks is taken only once
// the first is handled (Agent.superviseTicks).
func (r *rig) supervised(t *testing.T) {
	t.Helper()
	for range 2 {
		select {
		case r.agent.superviseTicks <- r.clock.Now():
		case <-time.After(waitLimit):
			t.Fatal("no worker took a supervision tick")
		}
	}
}

// refusedTwiceMore moves the fake clock past the worker's next two waits
// (1 s, then 2 s), a supervision tick after each, while the manager
// still refuses: the report or claim waiting is tried and refused twice
// more, and its wait is 4 s.
func (r *rig) refusedTwiceMore(t *testing.T) {
	t.Helper()
	for _, wait := range []time.Duration{ReportRetry, 2 * ReportRetry} {
		r.clock.advance(wait)
		r.supervised(t)
	}
}

// A running task's status that no manager takes (no leader during an
// election, say) is sent again until one does: no assignment set need
// come meanwhile, and without it the store would show the task starting
// for good while its pod runs, holding up a rolling update.
func TestARunningTasksRefusedReportIsSentAgain(t *testing.T) {
	t.Parallel()
	r, refusedRunning := runRefused(t, nil)
	// Sent again once its wait is over, not before, and again after a
	// longer one.
	for _, wait := range []time.Duration{ReportRetry, 2 * ReportRetry} {
		n := refusedRunning()
		r.clock.advance(wait - time.Millisecond)
		r.supervised(t)
		if got := refusedRunning(); got != n {
			t.Fatalf("the running report was sent again before its wait of %s was over: %s", wait, r.mgr.describeRefused())
		}
		r.clock.advance(time.Millisecond)
		r.supervised(t)
		if got := refusedRunning(); got != n+1 {
			t.Fatalf("the running report was not sent again once its wait of %s was over: %s", wait, r.mgr.describeRefused())
		}
	}
	r.mgr.mu.Lock()
	r.mgr.refuseUnfinished = false
	r.mgr.mu.Unlock()
	r.clock.advance(4 * ReportRetry)
	r.supervised(t)
	st := r.mgr.await(t, "web-t1", "the running status sent again", isState(legion.TaskRunning, ""))
	if !st.Ready || st.IP == "" {
		t.Errorf("the status sent again is not the task's: ready %v, address %q", st.Ready, st.IP)
	}
	// Taken, it is not sent again.
	n := len(r.mgr.of("web-t1"))
	r.clock.advance(MaxReportRetry)
	r.supervised(t)
	if got := r.mgr.of("web-t1"); len(got) != n {
		t.Errorf("reports after the status was taken: %s", describe(got[n:]))
	}
}

// A status refused through an election goes again once the node's calls
// reach a leader (a heartbeat taken), not at the end of a wait that grew
// through the election: the status would come up to 16 s late.
func TestARefusedReportGoesAgainOnceALeaderIsBack(t *testing.T) {
	t.Parallel()
	r, refusedRunning := runRefused(t, nil)
	r.refusedTwiceMore(t)
	n := refusedRunning()
	if n != 3 {
		t.Fatalf("the running report was refused %d times, want 3: %s", n, r.mgr.describeRefused())
	}
	r.mgr.mu.Lock()
	r.mgr.refuseUnfinished = false
	r.mgr.mu.Unlock()
	r.mgr.beat()
	r.clock.advance(ReportRetry - time.Millisecond)
	r.supervised(t)
	if st := r.mgr.of("web-t1"); len(st) != 0 {
		t.Fatalf("sent again before ReportRetry had passed: %s", describe(st))
	}
	r.clock.advance(time.Millisecond)
	r.supervised(t)
	if st := r.mgr.of("web-t1"); len(st) != 1 || st[0].State != legion.TaskRunning {
		t.Fatalf("a heartbeat taken did not bring the running report back before its wait of 4 s was over: %s", describe(st))
	}
}

// A report a manager refused (the task deleted, or another node's now)
// is not sent again: only one that no manager could take is.
func TestARefusedReportIsNotSentAgain(t *testing.T) {
	t.Parallel()
	r, running := runRefused(t, errors.New("task default/web-t1 was deleted"))
	r.clock.advance(MaxReportRetry)
	r.supervised(t)
	if n := running(); n != 1 {
		t.Errorf("a refused report was sent %d times", n)
	}
}
