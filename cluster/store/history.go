package store

import (
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/legionbsd/legion"
)

// HistorySize is how many applied events stay in memory for watches
// (Config.HistorySize changes it, for tests).
const HistorySize = 4096

// history holds the last applied events in order of version. A watch
// keeps a cursor (the last version it delivered) and reads from here, so
// a slow watcher never blocks the state machine, and every watcher sees
// every event once, in order.
//
// A watch of some kinds only is woken only by events of those kinds, and
// loses events only when one of its kinds leaves the ring: most of the
// manager's own watchers (the planner, the VIP allocator, the image
// resolver...) care for a few kinds, and waking each of them for every
// Config written took CPU from the write itself.
type history struct {
	mu      sync.Mutex
	ring    []Event // capacity HistorySize
	start   int     // index in ring of the oldest event
	n       int
	base    uint64                 // where the history began (open, snapshot install)
	horizon uint64                 // a watch of every kind from below this version has lost events
	dropped map[legion.Kind]uint64 // the last version of each kind pushed out of the ring
	resets  uint64                 // bumped by a snapshot install
	closed  bool
	wake    chan struct{} // closed and replaced on every change, for watches of every kind
	waiting []*kindWait   // watches of some kinds, waiting for one of them
}

// kindWait is a watch of some kinds waiting: ch is closed by the first
// change to one of them.
type kindWait struct {
	kinds []legion.Kind
	ch    chan struct{}
}

func newHistory(size int, horizon uint64) *history {
	return &history{ring: make([]Event, size), base: horizon, horizon: horizon,
		dropped: map[legion.Kind]uint64{}, wake: make(chan struct{})}
}

func (h *history) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	var kinds []legion.Kind // the batch's kinds: a few at most
	h.mu.Lock()
	for _, e := range evs {
		if h.n == len(h.ring) {
			old := h.ring[h.start]
			h.ring[h.start] = Event{}
			h.start = (h.start + 1) % len(h.ring)
			h.n--
			h.horizon = old.Version
			h.dropped[old.Object.GetKind()] = old.Version
		}
		h.ring[(h.start+h.n)%len(h.ring)] = e
		h.n++
		if k := e.Object.GetKind(); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	h.signal(kinds)
	h.mu.Unlock()
}

// reset drops the history after a snapshot install: open watches end
// with ErrReset and new ones start at the snapshot's version.
func (h *history) reset(horizon uint64) {
	h.mu.Lock()
	clear(h.ring)
	h.start, h.n, h.base, h.horizon = 0, 0, horizon, horizon
	clear(h.dropped)
	h.resets++
	h.signal(nil)
	h.mu.Unlock()
}

func (h *history) close() {
	h.mu.Lock()
	h.closed = true
	h.signal(nil)
	h.mu.Unlock()
}

// signal wakes the watches of every kind, and those of some kinds that
// hold one of kinds (every waiting watch when kinds is nil).
func (h *history) signal(kinds []legion.Kind) {
	close(h.wake)
	h.wake = make(chan struct{})
	h.waiting = slices.DeleteFunc(h.waiting, func(kw *kindWait) bool {
		if kinds != nil && !slices.ContainsFunc(kw.kinds, func(k legion.Kind) bool { return slices.Contains(kinds, k) }) {
			return false
		}
		close(kw.ch)
		return true
	})
}

// lost reports whether a watch of kinds (every kind when empty) that
// delivered up to version last has lost events pushed out of the ring.
func (h *history) lost(last uint64, kinds []legion.Kind) bool {
	if len(kinds) == 0 {
		return last < h.horizon
	}
	if last < h.base {
		return true
	}
	for _, k := range kinds {
		if last < h.dropped[k] {
			return true
		}
	}
	return false
}

func (h *history) at(i int) *Event { return &h.ring[(h.start+i)%len(h.ring)] }

// Watcher delivers the events after a version, one at a time.
type Watcher struct {
	h      *history
	last   uint64
	resets uint64
	kinds  []legion.Kind // only these; every kind when empty
}

func (h *history) watch(from uint64, kinds []legion.Kind) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.lost(from, kinds) {
		return nil, ErrCompacted
	}
	return &Watcher{h: h, last: from, resets: h.resets, kinds: slices.Clone(kinds)}, nil
}

// Next returns the next event after the last one delivered, waiting for
// it. It fails with ErrCompacted when the watcher fell more than the
// history behind, ErrReset after a snapshot install, ErrClosed when the
// store shuts down, or the context's error.
func (w *Watcher) Next(ctx context.Context) (Event, error) {
	h := w.h
	for {
		h.mu.Lock()
		switch {
		case h.closed:
			h.mu.Unlock()
			return Event{}, ErrClosed
		case h.resets != w.resets:
			h.mu.Unlock()
			return Event{}, ErrReset
		case h.lost(w.last, w.kinds):
			h.mu.Unlock()
			return Event{}, ErrCompacted
		}
		i := sort.Search(h.n, func(i int) bool { return h.at(i).Version > w.last })
		for ; i < h.n; i++ {
			e := h.at(i)
			w.last = e.Version // an event of another kind is passed over for good
			if len(w.kinds) == 0 || slices.Contains(w.kinds, e.Object.GetKind()) {
				ev := *e
				h.mu.Unlock()
				return ev, nil
			}
		}
		if err := ctx.Err(); err != nil {
			h.mu.Unlock()
			return Event{}, err
		}
		wake := h.wake
		var kw *kindWait
		if len(w.kinds) > 0 {
			kw = &kindWait{kinds: w.kinds, ch: make(chan struct{})}
			h.waiting = append(h.waiting, kw)
			wake = kw.ch
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			if kw != nil {
				h.mu.Lock()
				h.waiting = slices.DeleteFunc(h.waiting, func(x *kindWait) bool { return x == kw })
				h.mu.Unlock()
			}
			return Event{}, ctx.Err()
		case <-wake:
		}
	}
}

// Version is the version of the last event delivered, or passed over as
// of another kind (or the version the watch started from).
func (w *Watcher) Version() uint64 { return w.last }
