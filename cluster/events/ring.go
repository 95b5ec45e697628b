package events

import (
	"context"
	"sync"
	"time"

	"github.com/legionbsd/legion"
)

// Retention of a manager's events: the newest MaxEvents, none older than
// MaxAge.
const (
	MaxEvents = 10_000
	MaxAge    = time.Hour
)

// seqShift leaves room under each Raft index for the events of one
// change, so sequences follow the log on every manager alike.
const seqShift = 10

// Ring keeps the recent events in sequence order. A repeat of an
// object's last event (same type, reason and message) is not added
// again: that event's count goes up and it moves to the end with a new
// sequence and time, so a follower sees it once more.
type Ring struct {
	max    int
	maxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	evs  []legion.Event // ascending Sequence
	last map[legion.ObjectRef]uint64
	seq  uint64
	wake chan struct{} // closed and replaced on every addition
}

// NewRing returns a ring holding at most max events no older than maxAge
// by now's clock.
func NewRing(max int, maxAge time.Duration, now func() time.Time) *Ring {
	return &Ring{max: max, maxAge: maxAge, now: now, last: map[legion.ObjectRef]uint64{}, wake: make(chan struct{})}
}

// Add records the events of the change applied at version (a Raft
// index), giving each its sequence.
func (r *Ring) Add(version uint64, evs ...legion.Event) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		r.seq = max(r.seq+1, version<<seqShift)
		e.Sequence = r.seq
		if e.Count < 1 {
			e.Count = 1
		}
		if i, ok := r.find(e.Object); ok && same(r.evs[i], e) {
			prev := r.evs[i]
			e.Count += prev.Count
			e.First = prev.First
			if e.First.IsZero() {
				e.First = prev.Time
			}
			r.evs = append(r.evs[:i], r.evs[i+1:]...)
		}
		r.evs = append(r.evs, e)
		r.last[e.Object] = e.Sequence
	}
	r.trim()
	close(r.wake)
	r.wake = make(chan struct{})
}

// find is the index of the object's last event still held.
func (r *Ring) find(o legion.ObjectRef) (int, bool) {
	seq, ok := r.last[o]
	if !ok {
		return 0, false
	}
	i := r.search(seq)
	if i < len(r.evs) && r.evs[i].Sequence == seq {
		return i, true
	}
	delete(r.last, o)
	return 0, false
}

// search is the index of the first event with a sequence of at least seq.
func (r *Ring) search(seq uint64) int {
	lo, hi := 0, len(r.evs)
	for lo < hi {
		m := (lo + hi) / 2
		if r.evs[m].Sequence < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func same(a, b legion.Event) bool {
	return a.Type == b.Type && a.Reason == b.Reason && a.Message == b.Message
}

// trim drops events beyond the count and older than the age.
func (r *Ring) trim() {
	drop := max(len(r.evs)-r.max, 0)
	cut := r.now().Add(-r.maxAge)
	for drop < len(r.evs) && r.evs[drop].Time.Before(cut) {
		drop++
	}
	if drop == 0 {
		return
	}
	for _, e := range r.evs[:drop] {
		if r.last[e.Object] == e.Sequence {
			delete(r.last, e.Object)
		}
	}
	// Resliced, not copied: once full, every Add drops one, and copying
	// the other 9,999 each time cost a quarter of a loaded manager's CPU.
	// append moves what is held to a new array when the old one runs out.
	clear(r.evs[:drop])
	r.evs = r.evs[drop:]
}

// Filter narrows what is read; zero fields keep everything.
type Filter struct {
	Since     time.Time // last seen at or after
	After     uint64    // sequence
	Kind      legion.Kind
	Namespace string
	Name      string
	Type      legion.EventType
	Keep      func(legion.Event) bool // the caller's rights, say
}

// Match reports whether the filter keeps e.
func (f Filter) Match(e legion.Event) bool {
	switch {
	case e.Sequence <= f.After,
		!f.Since.IsZero() && e.Time.Before(f.Since),
		f.Kind != "" && e.Object.Kind != f.Kind,
		f.Namespace != "" && e.Object.Namespace != f.Namespace,
		f.Name != "" && e.Object.Name != f.Name,
		f.Type != "" && e.Type != f.Type:
		return false
	}
	return f.Keep == nil || f.Keep(e)
}

// Read returns the held events f keeps, in sequence order.
func (r *Ring) Read(f Filter) []legion.Event {
	evs, _, _ := r.read(f)
	return evs
}

// read also returns the last sequence it looked at and the channel that
// closes on the next addition.
func (r *Ring) read(f Filter) ([]legion.Event, uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trim()
	var out []legion.Event
	for _, e := range r.evs[r.search(f.After+1):] {
		if f.Match(e) {
			out = append(out, e)
		}
	}
	upto := f.After
	if n := len(r.evs); n > 0 {
		upto = max(upto, r.evs[n-1].Sequence)
	}
	return out, upto, r.wake
}

// Follow calls fn for each held event f keeps, then for each new one as
// it is added, until ctx ends (returning its error) or fn fails.
func (r *Ring) Follow(ctx context.Context, f Filter, fn func(legion.Event) error) error {
	for {
		evs, upto, wake := r.read(f)
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		f.After = upto
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}
