package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
)

var poll = dispatchertest.Poll

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
