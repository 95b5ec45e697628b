package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func ev(c *clock, name, reason, msg string) legion.Event {
	return legion.Event{Time: c.now(), Type: legion.EventWarning, Reason: reason, Message: msg,
		Object: legion.ObjectRef{Kind: legion.KindTask, Namespace: "shop", Name: name}}
}

func names(evs []legion.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%s/%s×%d ", e.Object.Name, e.Reason, e.Count)
	}
	return s
}

func TestRingBoundByCount(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(3, time.Hour, c.now)
	for i := range 5 {
		r.Add(uint64(i+1), ev(c, fmt.Sprint("t", i), "TaskFailed", "x"))
	}
	if got := names(r.Read(Filter{})); got != "t2/TaskFailed×1 t3/TaskFailed×1 t4/TaskFailed×1 " {
		t.Fatalf("kept %s", got)
	}
}

func TestRingBoundByAge(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(100, time.Hour, c.now)
	r.Add(1, ev(c, "old", "TaskFailed", "x"))
	c.add(30 * time.Minute)
	r.Add(2, ev(c, "new", "TaskFailed", "x"))
	c.add(31 * time.Minute)
	if got := names(r.Read(Filter{})); got != "new/TaskFailed×1 " {
		t.Fatalf("kept %s", got)
	}
}

func TestRingCoalescesRepeats(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(100, time.Hour, c.now)
	r.Add(10, ev(c, "a", "BackOff", "restarting in 2s"))
	first := r.Read(Filter{})[0]
	r.Add(11, ev(c, "b", "TaskStarted", ""))
	c.add(time.Second)
	r.Add(12, ev(c, "a", "BackOff", "restarting in 2s"))
	c.add(time.Second)
	r.Add(13, ev(c, "a", "BackOff", "restarting in 2s"))
	got := r.Read(Filter{})
	if names(got) != "b/TaskStarted×1 a/BackOff×3 " {
		t.Fatalf("kept %s", names(got))
	}
	a := got[1]
	if !a.First.Equal(t0) || !a.Time.Equal(t0.Add(2*time.Second)) || a.Sequence <= got[0].Sequence || a.Sequence <= first.Sequence {
		t.Fatalf("repeat: %+v (first %+v)", a, first)
	}
	// A different message on the object is a new event.
	r.Add(14, ev(c, "a", "BackOff", "restarting in 4s"))
	if got := names(r.Read(Filter{})); got != "b/TaskStarted×1 a/BackOff×3 a/BackOff×1 " {
		t.Fatalf("kept %s", got)
	}
}

func TestRingSequencesFollowTheLog(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(100, time.Hour, c.now)
	r.Add(7, ev(c, "a", "X", ""), ev(c, "b", "X", ""))
	r.Add(9, ev(c, "c", "X", ""))
	got := r.Read(Filter{})
	want := []uint64{7 << seqShift, 7<<seqShift + 1, 9 << seqShift}
	for i, e := range got {
		if e.Sequence != want[i] {
			t.Fatalf("event %d: sequence %d, want %d", i, e.Sequence, want[i])
		}
	}
}

func TestRingFilters(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(100, time.Hour, c.now)
	r.Add(1, ev(c, "a", "TaskFailed", "x"))
	c.add(time.Minute)
	n := ev(c, "n1", "NodeReady", "")
	n.Type, n.Object = legion.EventNormal, legion.ObjectRef{Kind: legion.KindNode, Name: "n1"}
	r.Add(2, n)
	r.Add(3, ev(c, "b", "TaskFailed", "x"))
	for _, tc := range []struct {
		f    Filter
		want string
	}{
		{Filter{Kind: legion.KindNode}, "n1/NodeReady×1 "},
		{Filter{Type: legion.EventWarning}, "a/TaskFailed×1 b/TaskFailed×1 "},
		{Filter{Namespace: "shop", Name: "b"}, "b/TaskFailed×1 "},
		{Filter{Since: t0.Add(time.Second)}, "n1/NodeReady×1 b/TaskFailed×1 "},
		{Filter{After: 2 << seqShift}, "b/TaskFailed×1 "},
		{Filter{Keep: func(e legion.Event) bool { return e.Object.Namespace == "" }}, "n1/NodeReady×1 "},
	} {
		if got := names(r.Read(tc.f)); got != tc.want {
			t.Errorf("%+v: got %s want %s", tc.f, got, tc.want)
		}
	}
}

func TestRingFollowResumes(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	r := NewRing(100, time.Hour, c.now)
	r.Add(1, ev(c, "a", "TaskFailed", "x"))
	r.Add(2, ev(c, "b", "TaskFailed", "x"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan legion.Event)
	done := make(chan error, 1)
	stop := errors.New("enough")
	f := Filter{Name: "c"}
	go func() {
		n := 0
		done <- r.Follow(ctx, f, func(e legion.Event) error {
			got <- e
			if n++; n == 2 {
				return stop
			}
			return nil
		})
	}()
	r.Add(3, ev(c, "a", "TaskStarted", "")) // not kept
	r.Add(4, ev(c, "c", "TaskFailed", "x"))
	first := <-got
	if first.Object.Name != "c" || first.Count != 1 {
		t.Fatalf("first followed: %+v", first)
	}
	r.Add(5, ev(c, "c", "TaskFailed", "x")) // a repeat comes again with its count
	second := <-got
	if second.Count != 2 || second.Sequence <= first.Sequence {
		t.Fatalf("second followed: %+v after %+v", second, first)
	}
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("follow ended with %v", err)
	}
	// Resuming after the last seen sequence sends only what came since.
	r.Add(6, ev(c, "c", "TaskStarted", ""))
	f.After = second.Sequence
	var resumed []legion.Event
	cctx, ccancel := context.WithCancel(ctx)
	err := r.Follow(cctx, f, func(e legion.Event) error { resumed = append(resumed, e); ccancel(); return nil })
	if !errors.Is(err, context.Canceled) || names(resumed) != "c/TaskStarted×1 " {
		t.Fatalf("resumed %s, ended %v", names(resumed), err)
	}
}

// BenchmarkAddWhenFull is the cost of an event once the ring holds all it
// may: each addition drops the oldest.
func BenchmarkAddWhenFull(b *testing.B) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	r := NewRing(MaxEvents, MaxAge, c.now)
	for i := range MaxEvents {
		r.Add(uint64(i+1), ev(c, fmt.Sprintf("t%d", i), "Started", "started"))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.Add(uint64(MaxEvents+i+1), ev(c, fmt.Sprintf("u%d", i), "Started", "started"))
	}
}
