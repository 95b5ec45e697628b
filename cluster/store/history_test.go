package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// eventOf is an applied event of kind at version v.
func eventOf(t *testing.T, kind legion.Kind, v uint64) Event {
	t.Helper()
	o, err := legion.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	o.GetMetadata().Namespace, o.GetMetadata().Name, o.GetMetadata().Version = "default", "x", v
	return Event{Type: Added, Version: v, Object: o}
}

// waitingWatches is how many watches of some kinds wait on h.
func waitingWatches(h *history) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// A watch of some kinds delivers those only, in order, and its version
// moves past the others so it does not read them again.
func TestWatchOfSomeKindsDeliversThoseOnly(t *testing.T) {
	t.Parallel()
	h := newHistory(16, 0)
	h.append([]Event{eventOf(t, legion.KindConfig, 1), eventOf(t, legion.KindService, 2), eventOf(t, legion.KindConfig, 3)})
	h.append([]Event{eventOf(t, legion.KindTask, 4), eventOf(t, legion.KindSecret, 5)})
	w, err := h.watch(0, []legion.Kind{legion.KindService, legion.KindTask})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for range 2 {
		ev, err := w.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Version)
	}
	if got[0] != 2 || got[1] != 4 {
		t.Fatalf("a watch of Services and Tasks delivered versions %v, want [2 4]", got)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("after the last of its kinds: %v, want nothing pending", err)
	}
	if w.Version() != 5 {
		t.Fatalf("version %d after passing over the Secret at 5", w.Version())
	}
}

// A write of another kind does not wake a watch of some kinds; one of
// its kinds does. A wait given up leaves nothing behind.
func TestWatchOfSomeKindsIsWokenByThoseOnly(t *testing.T) {
	t.Parallel()
	h := newHistory(16, 0)
	w, err := h.watch(0, []legion.Kind{legion.KindService})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Event, 1)
	go func() {
		ev, err := w.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- ev
	}()
	deadline := time.Now().Add(10 * time.Second)
	for waitingWatches(h) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the watch never waited")
		}
		time.Sleep(time.Millisecond)
	}
	h.mu.Lock()
	kw := h.waiting[0]
	h.mu.Unlock()
	h.append([]Event{eventOf(t, legion.KindConfig, 1), eventOf(t, legion.KindSecret, 2)})
	select {
	case <-kw.ch:
		t.Fatal("Configs and Secrets woke a watch of Services")
	default:
	}
	if n := waitingWatches(h); n != 1 {
		t.Fatalf("%d watches waiting after other kinds' writes, want 1", n)
	}
	h.append([]Event{eventOf(t, legion.KindConfig, 3), eventOf(t, legion.KindService, 4)})
	select {
	case ev := <-got:
		if ev.Version != 4 {
			t.Fatalf("woken with version %d, want the Service's 4", ev.Version)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Service's write did not wake the watch")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := w.Next(ctx)
		errs <- err
	}()
	for waitingWatches(h) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the watch never waited again")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait given up: %v", err)
	}
	if n := waitingWatches(h); n != 0 {
		t.Fatalf("%d watches still waiting after the wait was given up", n)
	}
}

// Other kinds' events leaving the ring lose a watch of some kinds
// nothing; one of its own kinds leaving it does. A watch of every kind
// has lost both.
func TestWatchOfSomeKindsLosesOnlyItsOwnKinds(t *testing.T) {
	t.Parallel()
	h := newHistory(4, 0)
	h.append([]Event{eventOf(t, legion.KindService, 1)})
	services, err := h.watch(1, []legion.Kind{legion.KindService})
	if err != nil {
		t.Fatal(err)
	}
	every, err := h.watch(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v <= 10; v++ {
		h.append([]Event{eventOf(t, legion.KindConfig, v)})
	}
	h.append([]Event{eventOf(t, legion.KindService, 11)})
	ev, err := services.Next(context.Background())
	if err != nil || ev.Version != 11 {
		t.Fatalf("a watch of Services after Configs left the ring: version %d, %v; want 11", ev.Version, err)
	}
	if _, err := every.Next(context.Background()); !errors.Is(err, ErrCompacted) {
		t.Fatalf("a watch of every kind after Configs it never read left the ring: %v, want ErrCompacted", err)
	}
	if _, err := h.watch(1, []legion.Kind{legion.KindTask}); err != nil {
		t.Fatalf("a new watch of Tasks from 1: %v", err)
	}

	// Four more Configs push the Service at 11 out.
	for v := uint64(12); v <= 15; v++ {
		h.append([]Event{eventOf(t, legion.KindConfig, v)})
	}
	if _, err := h.watch(10, []legion.Kind{legion.KindService}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("a watch of Services from before one that left the ring: %v, want ErrCompacted", err)
	}
	if _, err := h.watch(11, []legion.Kind{legion.KindService}); err != nil {
		t.Fatalf("a watch of Services from the one that left: %v", err)
	}
	h.reset(20)
	if _, err := h.watch(15, []legion.Kind{legion.KindService}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("a watch of Services from before a snapshot install: %v, want ErrCompacted", err)
	}
}
