package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/cluster/store/storetest"
)

var poll = dispatchertest.Poll

// runUntilEnd runs fn until the test ends, then cancels it and waits for
// it to return.
func runUntilEnd(t *testing.T, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { defer close(done); fn(ctx) }()
}

type flag struct{ v atomic.Bool }

func (f *flag) IsLeader() bool { return f.v.Load() }

func TestRunWhileLeaderStartsAndStopsWithLeadership(t *testing.T) {
	t.Parallel()
	var lead flag
	var mu sync.Mutex
	running, starts := 0, 0
	task := Task{Name: "t", Run: func(ctx context.Context) error {
		mu.Lock()
		running++
		starts++
		since := Since(ctx)
		mu.Unlock()
		if since.IsZero() {
			t.Error("no leadership start time in the context")
		}
		<-ctx.Done()
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { RunWhileLeader(ctx, &lead, 5*time.Millisecond, nil, task); close(done) }()
	state := func() (int, int) { mu.Lock(); defer mu.Unlock(); return running, starts }
	lead.v.Store(true)
	poll(t, "started on leading", 5*time.Second, func() bool { r, _ := state(); return r == 1 })
	lead.v.Store(false)
	poll(t, "stopped on losing leadership", 5*time.Second, func() bool { r, _ := state(); return r == 0 })
	lead.v.Store(true)
	poll(t, "started again", 5*time.Second, func() bool { r, s := state(); return r == 1 && s == 2 })
	cancel()
	<-done
	if r, _ := state(); r != 0 {
		t.Fatal("a task outlived RunWhileLeader")
	}
}

// countingTask is a task that counts itself in running while it runs.
func countingTask(running *atomic.Int64) Task {
	return Task{Name: "t", Run: func(ctx context.Context) error {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return nil
	}}
}

// settling is a flag whose Barrier waits for the test's answer.
type settling struct {
	flag
	calls   atomic.Int64
	answers chan error
}

func (s *settling) Barrier(ctx context.Context) error {
	s.calls.Add(1)
	select {
	case err := <-s.answers:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A new leader starts the tasks only once its barrier says it has applied
// what earlier terms committed; a barrier that fails starts nothing, and
// the next look tries again.
func TestRunWhileLeaderStartsTheTasksAfterTheBarrier(t *testing.T) {
	t.Parallel()
	lead := &settling{answers: make(chan error)}
	var running atomic.Int64
	task := countingTask(&running)
	runUntilEnd(t, func(ctx context.Context) { RunWhileLeader(ctx, lead, 5*time.Millisecond, nil, task) })
	lead.v.Store(true)
	poll(t, "the barrier asked for", 5*time.Second, func() bool { return lead.calls.Load() == 1 })
	if running.Load() != 0 {
		t.Fatal("the tasks started before the barrier returned")
	}
	lead.answers <- errors.New("no quorum yet")
	poll(t, "the barrier asked for again", 5*time.Second, func() bool { return lead.calls.Load() == 2 })
	if running.Load() != 0 {
		t.Fatal("the tasks started after a failed barrier")
	}
	lead.answers <- nil
	poll(t, "started after the barrier", 5*time.Second, func() bool { return running.Load() == 1 })
	if n := lead.calls.Load(); n != 2 {
		t.Fatalf("the barrier was asked for %d times, want 2", n)
	}
}

// A store says when its leader changes: the tasks start as it is elected
// and stop as it loses the leadership, though the period is an hour (the
// manager's is a second, which a failover waited out on top of the
// election).
func TestRunWhileLeaderFollowsTheStoresElections(t *testing.T) {
	t.Parallel()
	st, lead := storetest.Unelected(t, nil)
	var running atomic.Int64
	task := countingTask(&running)
	runUntilEnd(t, func(ctx context.Context) { RunWhileLeader(ctx, st, time.Hour, nil, task) })
	lead()
	poll(t, "started on the election", 10*time.Second, func() bool { return running.Load() == 1 })
	// A second voter that never answers: the store hears from no quorum
	// and steps down after its lease (the change is not waited for: it
	// cannot commit).
	st.Raft().AddVoter("m2", "nowhere", 0, 0)
	poll(t, "stopped on losing the leadership", 10*time.Second, func() bool { return running.Load() == 0 })
}

// storeSource is a manager whose store is open from the start.
type storeSource struct{ st *store.Store }

func (s storeSource) Store() *store.Store { return s.st }

// Run hands each term's controller loop the cache it keeps for the
// manager's lifetime, so a new leader plans from objects it already
// holds instead of reading the whole store after the election.
func TestRunHandsTheTermsControllerTheCacheItKeeps(t *testing.T) {
	t.Parallel()
	st, lead := storetest.Unelected(t, nil)
	loops := make(chan *controller.Loop, 1)
	runUntilEnd(t, func(ctx context.Context) {
		Run(ctx, storeSource{st}, Options{Period: time.Hour, started: func(l *controller.Loop) { loops <- l }})
	})
	lead()
	select {
	case l := <-loops:
		if l.Cache == nil {
			t.Fatal("the term's controller loop was given no cache: it reads the whole store before its first pass")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no controller loop started on the election")
	}
}
