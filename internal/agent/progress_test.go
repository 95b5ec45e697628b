package agent

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/legionbsd/legion"
)

// heldManager holds the report of one state until release is closed.
type heldManager struct {
	*fakeManager
	hold    legion.TaskState
	held    chan struct{} // closed once a report of hold waits
	release chan struct{}
}

func (m *heldManager) Report(ctx context.Context, ns, name, uid string, st legion.TaskStatus) error {
	if st.State == m.hold {
		close(m.held)
		<-m.release
	}
	return m.fakeManager.Report(ctx, ns, name, uid, st)
}

// A step's report on the way to running does not hold the pod back: with
// the manager yet to take "preparing", the pod is made; the reports still
// reach it in order, each of them, "running" last.
func TestProgressReportsDoNotHoldThePodBack(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	m := &heldManager{fakeManager: r.mgr, hold: legion.TaskPreparing, held: make(chan struct{}), release: make(chan struct{})}
	r.agent.Manager = m
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(m.release) }) }
	r.start(t)
	// Run before the agent's cleanup (cleanups run last first): a failed
	// test must not leave the agent blocked in a report.
	t.Cleanup(release)
	r.assign(nil, testTask("t1"))
	<-m.held
	waitFor(t, "the pod's containers made while preparing is unanswered", func() bool {
		return slices.Contains(r.rt.createdIDs(), "t1-main")
	}, func() string { return "" })
	if got := r.mgr.of("web-t1"); len(got) != 0 {
		t.Fatalf("reports taken before preparing: %s", describe(got))
	}
	release()
	r.mgr.await(t, "web-t1", "the task running", isState(legion.TaskRunning, ""))
	var states []string
	for _, s := range r.mgr.of("web-t1") {
		states = append(states, string(s.State)+": "+s.Message)
	}
	if want := []string{"preparing: pulling images", "starting: creating the pod", "running: "}; !slices.Equal(states, want) {
		t.Errorf("reports: %q, want %q", states, want)
	}
}
