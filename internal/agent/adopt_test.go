package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail"
)

// runningPod leaves the task's pod running in the runtime as an earlier
// agent would have, and returns the task as the store shows it.
func runningPod(t *testing.T, r *rig, uid string) *legion.Task {
	t.Helper()
	task := testTask(uid)
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: testIP}
	ctx := context.Background()
	// Straight to the runtime, past the recording.
	if err := r.rt.Memory.Create(ctx, jail.ContainerSpec{ID: uid, Infra: true, Labels: labels(task, testNode, "")}); err != nil {
		t.Fatal(err)
	}
	id := containerID(task, "main")
	if err := r.rt.Memory.Create(ctx, jail.ContainerSpec{ID: id, Pod: uid, Labels: labels(task, testNode, "main"), Command: sh("sleep 30")}); err != nil {
		t.Fatal(err)
	}
	if err := r.rt.Memory.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	return task
}

// An agent started over a runtime already running a task's pod takes it
// over: nothing is pulled, created or started, the task is reported
// running (ready as it was), and the pod is supervised from then on.
func TestAgentAdoptsRunningPod(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := runningPod(t, r, "t1")
	r.start(t)
	r.assign(nil, task)

	st, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the adoption", isState(legion.TaskRunning, "adopted after an agent restart"))
	if !st.Ready || st.IP != testIP {
		t.Errorf("adopted: ready %v ip %q", st.Ready, st.IP)
	}
	if got := r.mgr.of("web-t1"); len(got) != 1 {
		t.Errorf("reports before the adoption: %s", describe(got))
	}
	if c, p, s := r.rt.created(), r.images.pulled(), r.rt.started(); len(c)+len(p)+len(s) > 0 {
		t.Errorf("adoption created %d containers, pulled %q, started %q", len(c), p, s)
	}
	if ip, ok := r.agent.PodIP("t1"); !ok || ip != testIP {
		t.Errorf("PodIP of the adopted pod: %q, %v", ip, ok)
	}

	// Its container's end is the worker's to handle, as for its own pods.
	if err := r.rt.Stop(context.Background(), "t1-main", time.Second); err != nil {
		t.Fatal(err)
	}
	const msg = "container main exited with 143: restarting in 1s (attempt 1)"
	_, seen = r.mgr.awaitAfter(t, seen, "web-t1", "the restart pending", isState(legion.TaskRunning, msg))
	r.clock.advance(time.Second)
	r.mgr.awaitAfter(t, seen, "web-t1", "the restart", isState(legion.TaskRunning, ""))
	if r.rt.startCount("t1-main") != 1 {
		t.Errorf("starts after the adoption: %q", r.rt.started())
	}
}

// A pod adopted with a container that ended meanwhile applies the restart
// policy to it at once.
func TestAgentAdoptsPodWithEndedContainer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := runningPod(t, r, "t1")
	task.Spec.Pod.RestartPolicy = &legion.RestartPolicy{Condition: legion.RestartNone}
	if err := r.rt.Memory.Stop(context.Background(), "t1-main", time.Second); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	r.assign(nil, task)
	st := r.mgr.await(t, "web-t1", "the task failed", func(s legion.TaskStatus) bool { return s.State.Terminal() })
	if st.State != legion.TaskFailed || st.Message != "container main exited with 143" {
		t.Errorf("ended %s %q, want failed with the container's exit", st.State, st.Message)
	}
	awaitGone(t, r, "t1")
}

// A pod adopted ready is reported ready until its readiness probe says
// otherwise, and not ready once it fails, even if it never passed under
// this agent: the earlier agent's word is not taken for ever.
func TestAgentAdoptedReadinessFails(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := runningPod(t, r, "t1")
	task.Spec.Pod.Containers[0].Probes.Readiness = execProbe()
	r.rt.setExec("t1-main", 1) // failing from the first check on
	r.start(t)
	r.assign(nil, task)
	// The adoption is reported before any probe result is taken in.
	st, seen := r.mgr.awaitAfter(t, 0, "web-t1", "the adoption", isState(legion.TaskRunning, "adopted after an agent restart"))
	if !st.Ready {
		t.Error("a pod adopted ready was reported not ready before any probe")
	}
	st, _ = r.mgr.awaitAfter(t, seen, "web-t1", "the task not ready", func(s legion.TaskStatus) bool { return !s.Ready })
	if want := `container main not ready: exec ["/bin/check"]: exit code 1, expected 0`; st.State != legion.TaskRunning || st.Message != want {
		t.Errorf("not ready: %s %q, want running %q", st.State, st.Message, want)
	}
}

// An agent started with no pod for a task the store shows running (its
// pod went with the last agent, as legion up's Ctrl-C removes them)
// reports the task orphaned rather than leave it running and ready with
// nothing behind it, and starts nothing for it.
func TestAgentReportsATaskWhosePodIsGoneOrphaned(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: testIP}
	r.start(t)
	r.assign(nil, task)
	st := r.mgr.await(t, "web-t1", "the lost task reported", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskOrphaned && strings.HasPrefix(s.Message, "its pod was gone")
	})
	if st.Ready {
		t.Errorf("a lost task reported ready: %+v", st)
	}
	if c := r.rt.created(); len(c) > 0 {
		t.Errorf("the agent made %d containers for a task whose status it did not own", len(c))
	}
	// A root prepared before the pod was made (the last agent killed in
	// between) has nothing else to name it: it goes with the report.
	r.images.mu.Lock()
	removed := slices.Clone(r.images.removed)
	r.images.mu.Unlock()
	if want := containerID(task, "main"); !slices.Contains(removed, want) {
		t.Errorf("roots removed %v, want %s among them", removed, want)
	}
}

// An agent started over the root of a task deleted while the node was
// away (the last agent ended between preparing the root and making the
// container, so no pod names it, and no task either) removes that root;
// the roots of the task it adopts, of the task it starts and of a
// container that still exists stay.
func TestAgentRemovesRootsOfTasksGoneWhileAway(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	adopted := runningPod(t, r, "t1")
	fresh := testTask("t2")
	other := "t3-main" // a container no task names, still there
	if err := r.rt.Memory.Create(ctx, jail.ContainerSpec{ID: other, Command: sh("sleep 30")}); err != nil {
		t.Fatal(err)
	}
	stray := "t9-main"
	for _, id := range []string{containerID(adopted, "main"), containerID(fresh, "main"), other, stray} {
		if _, err := r.images.PrepareRoot(ctx, id, "example/web:1", "default", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	r.start(t)
	r.assign(nil, adopted, fresh)
	r.mgr.await(t, "web-t2", "the new task running", func(s legion.TaskStatus) bool { return s.State == legion.TaskRunning })
	r.images.mu.Lock()
	removed := slices.Clone(r.images.removed)
	r.images.mu.Unlock()
	if !slices.Contains(removed, stray) {
		t.Errorf("roots removed %v: want the stray %s among them", removed, stray)
	}
	for _, id := range []string{containerID(adopted, "main"), containerID(fresh, "main"), other} {
		if slices.Contains(removed, id) {
			t.Errorf("roots removed %v: %s is in use and must stay", removed, id)
		}
	}
}

// An agent started with no pod for a task told to stop that the store
// still shows running (the last agent ended between removing the pod and
// reporting it) reports the task shut down: nothing else would, and the
// store would show it running for ever.
func TestAgentReportsAStoppingTaskWhosePodIsGoneShutDown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := testTask("t1")
	task.Spec.DesiredState = legion.TaskShutdown
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Message: drainingMessage, IP: testIP}
	r.start(t)
	r.assign(nil, task)
	st := r.mgr.await(t, "web-t1", "the stopped task reported", func(s legion.TaskStatus) bool { return s.State.Terminal() })
	if st.State != legion.TaskShutdown || !strings.HasPrefix(st.Message, "stopped: its pod was gone") || st.Ready {
		t.Errorf("reported %s %q (ready %v), want shutdown saying its pod was gone", st.State, st.Message, st.Ready)
	}
	if c := r.rt.created(); len(c) > 0 {
		t.Errorf("the agent made %d containers for a task told to stop", len(c))
	}
}

// An agent started over a pod whose task ended while the node was away
// (orphaned, its ordinal given a new task on this node) removes that pod
// before it makes the new task's: the two would share the ordinal's
// volume, and a network that does not know the old pod's address could
// give the new one the same.
func TestAgentRemovesPodsNoTaskWantsBeforeMakingNewOnes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	old := runningPod(t, r, "t1")
	old.Spec.DesiredState, old.Status.State, old.Status.Ready = legion.TaskShutdown, legion.TaskOrphaned, false
	replacement := testTask("t2")
	// The old pod's removal is held a while: a new pod made meanwhile
	// is made beside it.
	var mu sync.Mutex
	removing, beside := false, []string(nil)
	r.rt.beforeRemove = func(id string) {
		if !strings.HasPrefix(id, "t1") {
			return
		}
		mu.Lock()
		removing = true
		mu.Unlock()
		time.Sleep(time.Second)
	}
	r.rt.beforeCreate = func(spec jail.ContainerSpec) {
		if _, err := r.rt.Memory.Inspect(context.Background(), "t1-main"); err == nil && strings.HasPrefix(spec.ID, "t2") {
			mu.Lock()
			beside = append(beside, spec.ID)
			mu.Unlock()
		}
	}
	r.start(t)
	r.assign(nil, old, replacement)
	r.mgr.await(t, "web-t2", "the new task running", func(s legion.TaskStatus) bool { return s.State == legion.TaskRunning })
	mu.Lock()
	defer mu.Unlock()
	if !removing {
		t.Fatal("the old pod was never removed")
	}
	if len(beside) > 0 {
		t.Fatalf("made %q while the old pod was still there", beside)
	}
	if _, err := r.rt.Memory.Inspect(context.Background(), "t1-main"); err == nil {
		t.Error("the old pod's container is still there")
	}
}
