package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent/attach"
	"github.com/legionbsd/legion/sys"
)

// pluginNode gives the rig's agent the real attacher of a process node
// with one volume plugin, blk, an executable that mounts by making the
// directory and fails to unmount while busy exists (a device in use).
// It keeps an unshared plugin Volume default/blk, held by one node at a
// time as an iSCSI one is.
func pluginNode(t *testing.T, r *rig) (busy string) {
	t.Helper()
	dir := t.TempDir()
	busy = filepath.Join(dir, "busy")
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
mount) mkdir -p "$2" ;;
unmount) if [ -e %q ]; then echo "device busy" >&2; exit 1; fi ;;
*) exit 2 ;;
esac
`, busy)
	if err := os.WriteFile(filepath.Join(dir, "blk"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r.agent.Attacher = r.attacher(dir)
	v := testVolume("blk", "v1", legion.DriverPlugin)
	v.Spec.Size, v.Spec.Plugin = 0, &legion.PluginVolume{Name: "blk"}
	r.mgr.addVolume(v)
	return busy
}

// busyPluginNode is pluginNode with the device busy from the start: a
// detach fails until busy is removed.
func busyPluginNode(t *testing.T, r *rig) (busy string) {
	t.Helper()
	busy = pluginNode(t, r)
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return busy
}

// runAndStop runs task t1, mounting default/blk, then has it stopped, and
// returns where its directory records what is attached.
func (r *rig) runAndStop(t *testing.T) (record string) {
	t.Helper()
	r.assign(nil, volumeTask("t1", "blk"))
	r.mgr.await(t, "web-t1", "running", isRunning)
	r.assign(nil)
	r.mgr.await(t, "web-t1", "shut down", func(s legion.TaskStatus) bool { return s.State == legion.TaskShutdown })
	return filepath.Join(r.agent.RunDir, "tasks", "t1", "attached.json")
}

// waitFailedTries waits until a's detach of t1's directory has failed
// fails times in a row.
func waitFailedTries(t *testing.T, a *Agent, what string, fails int) {
	t.Helper()
	waitFor(t, what, func() bool {
		a.detaches.mu.Lock()
		defer a.detaches.mu.Unlock()
		p := a.detaches.pending["t1"]
		return p != nil && p.fails >= fails
	}, func() string { return "the detach not tried again" })
}

func (r *rig) attacher(pluginDir string) *attach.Attacher {
	return &attach.Attacher{Runner: sys.NewFake(), RunDir: r.agent.RunDir, PluginDir: pluginDir, Platform: attach.PlatformProcess}
}

// runAgent runs a until the returned stop, which waits for it to return:
// its pods run on, as when an agent is killed or upgraded.
func runAgent(t *testing.T, a *Agent) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// restarted is a new agent of the rig's node, as one started after the
// last ended: same managers, runtime, directories and plugins.
func (r *rig) restarted() *Agent {
	old := r.agent
	return &Agent{Node: old.Node, Manager: old.Manager, Runtime: old.Runtime, Images: old.Images, Network: old.Network,
		DataDir: old.DataDir, RunDir: old.RunDir, Now: old.Now, Attacher: r.attacher(old.Attacher.(*attach.Attacher).PluginDir)}
}

func (m *fakeManager) holder(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.volumes[key].Status.Node
}

// An agent that finishes the stop of a pod an earlier agent left lets go
// of the pod's Volume once it is detached, before it reports the task
// ended, so the next node can attach it.
func TestVolumeReleasedWhenARestartedAgentFinishesTheStop(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	pluginNode(t, r)
	stop := runAgent(t, r.agent)
	task := volumeTask("t1", "blk")
	r.assign(nil, task)
	running := r.mgr.await(t, "web-t1", "running", isRunning)
	if h := r.mgr.holder("default/blk"); h != testNode {
		t.Fatalf("volume held by %q, want %s", h, testNode)
	}
	stop()

	// Told to stop while no agent ran: the store still shows it running.
	task.Spec.DesiredState, task.Status = legion.TaskShutdown, running
	runAgent(t, r.restarted())
	r.assign(nil, task)
	r.mgr.await(t, "web-t1", "the stop finished", isState(legion.TaskShutdown, "stopped"))
	if got := r.mgr.released(); !slices.Contains(got, "default/blk") {
		t.Fatalf("releases %q by the task's last report, want default/blk", got)
	}
	if h := r.mgr.holder("default/blk"); h != "" {
		t.Errorf("volume still held by %q", h)
	}
	if _, err := os.Stat(filepath.Join(r.agent.RunDir, "tasks", "t1")); !os.IsNotExist(err) {
		t.Errorf("task directory after the teardown: %v, want it gone", err)
	}
}

// A Volume whose detach failed stays held, through a restart too while
// the detach still fails; once the sweep of a later agent detaches it,
// that agent lets go of it.
func TestVolumeReleasedOnceTheSweepDetachesIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	busy := busyPluginNode(t, r)
	ctx := context.Background()
	stop := runAgent(t, r.agent)
	record := r.runAndStop(t)
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the failed detach's record: %v", err)
	}
	held := func(a *Agent, when string) {
		t.Helper()
		r.mgr.mu.Lock()
		vols := []*legion.Volume{r.mgr.volumes["default/blk"]}
		r.mgr.mu.Unlock()
		a.releaseIdle(ctx, vols)
		if got := r.mgr.released(); len(got) != 0 {
			t.Fatalf("%s: released %q while still attached", when, got)
		}
	}
	held(r.agent, "after the failed detach")
	stop()

	// A new agent whose sweep fails too keeps holding it.
	again := r.restarted()
	again.initLog()
	again.sweepTaskDirs(ctx, nil)
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the record after a failed sweep: %v", err)
	}
	held(again, "after a failed sweep")

	// The device is free: the next agent's sweep detaches it and the
	// agent lets go of it.
	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	runAgent(t, r.restarted())
	r.assign(nil)
	waitFor(t, "the release", func() bool { return slices.Equal(r.mgr.released(), []string{"default/blk"}) },
		func() string { return fmt.Sprint(r.mgr.released()) })
	if _, err := os.Stat(filepath.Dir(record)); !os.IsNotExist(err) {
		t.Errorf("task directory after the sweep: %v, want it gone", err)
	}
}

// A detach that fails at the teardown (the device busy) is tried again
// while the agent runs, backing off: once it works, the agent lets go of
// the Volume and the task's directory goes, no restart needed.
func TestAFailedDetachIsTriedAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	busy := busyPluginNode(t, r)
	r.agent.DetachRetry = 20 * time.Millisecond
	runAgent(t, r.agent)
	record := r.runAndStop(t)
	// A few tries fail while the device is busy: the Volume stays held.
	waitFailedTries(t, r.agent, "two more tries failing", 3)
	if got := r.mgr.released(); len(got) != 0 {
		t.Fatalf("released %q while still attached", got)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the failed detach's record: %v", err)
	}

	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release", func() bool { return slices.Equal(r.mgr.released(), []string{"default/blk"}) },
		func() string { return fmt.Sprint(r.mgr.released()) })
	waitFor(t, "the task directory gone", func() bool {
		_, err := os.Stat(filepath.Dir(record))
		return os.IsNotExist(err)
	}, func() string { return "it is still there" })
	if h := r.mgr.holder("default/blk"); h != "" {
		t.Errorf("volume still held by %q", h)
	}
}

// The wait between tries doubles from the first up to DetachRetryMax.
func TestDetachRetryDelays(t *testing.T) {
	t.Parallel()
	a := &Agent{}
	var got []time.Duration
	for fails := 1; fails <= 7; fails++ {
		got = append(got, a.detachDelay(fails))
	}
	s := time.Second
	want := []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, DetachRetryMax, DetachRetryMax}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

// A directory an earlier agent left, whose detach fails at the new
// agent's start, is tried again while that agent runs; once detached,
// the agent lets go of its Volume without waiting for another set.
func TestALeftoverDirectoryIsDetachedOnALaterTry(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	busy := busyPluginNode(t, r)
	stop := runAgent(t, r.agent)
	record := r.runAndStop(t)
	stop()

	again := r.restarted()
	again.DetachRetry = 20 * time.Millisecond
	runAgent(t, again)
	r.assign(nil) // its Volumes: held here, recorded attached, so kept
	waitFailedTries(t, again, "a failed try after the start's", 2)
	if got := r.mgr.released(); len(got) != 0 {
		t.Fatalf("released %q while still attached", got)
	}
	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release", func() bool { return slices.Equal(r.mgr.released(), []string{"default/blk"}) },
		func() string { return fmt.Sprint(r.mgr.released()) })
	if _, err := os.Stat(filepath.Dir(record)); !os.IsNotExist(err) {
		t.Errorf("task directory after the later try: %v, want it gone", err)
	}
}
