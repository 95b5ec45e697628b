package store

import (
	"context"
	"sort"
	"sync"
)

// HistorySize is how many applied events stay in memory for watches
// (Config.HistorySize changes it, for tests).
const HistorySize = 4096

// history holds the last applied events in order of version. A watch
// keeps a cursor (the last version it delivered) and reads from here, so
// a slow watcher never blocks the state machine, and every watcher sees
// every event once, in order.
type history struct {
	mu      sync.Mutex
	ring    []Event // capacity HistorySize
	start   int     // index in ring of the oldest event
	n       int
	horizon uint64 // a watch from below this version has lost events
	resets  uint64 // bumped by a snapshot install
	closed  bool
	wake    chan struct{} // closed and replaced on every change
}

func newHistory(size int, horizon uint64) *history {
	return &history{ring: make([]Event, size), horizon: horizon, wake: make(chan struct{})}
}

func (h *history) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	for _, e := range evs {
		if h.n == len(h.ring) {
			old := h.ring[h.start]
			h.ring[h.start] = Event{}
			h.start = (h.start + 1) % len(h.ring)
			h.n--
			h.horizon = old.Version
		}
		h.ring[(h.start+h.n)%len(h.ring)] = e
		h.n++
	}
	h.signal()
	h.mu.Unlock()
}

// reset drops the history after a snapshot install: open watches end
// with ErrReset and new ones start at the snapshot's version.
func (h *history) reset(horizon uint64) {
	h.mu.Lock()
	clear(h.ring)
	h.start, h.n, h.horizon = 0, 0, horizon
	h.resets++
	h.signal()
	h.mu.Unlock()
}

func (h *history) close() {
	h.mu.Lock()
	h.closed = true
	h.signal()
	h.mu.Unlock()
}

func (h *history) signal() {
	close(h.wake)
	h.wake = make(chan struct{})
}

func (h *history) at(i int) *Event { return &h.ring[(h.start+i)%len(h.ring)] }

// Watcher delivers the events after a version, one at a time.
type Watcher struct {
	h      *history
	last   uint64
	resets uint64
}

func (h *history) watch(from uint64) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if from < h.horizon {
		return nil, ErrCompacted
	}
	return &Watcher{h: h, last: from, resets: h.resets}, nil
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
		case w.last < h.horizon:
			h.mu.Unlock()
			return Event{}, ErrCompacted
		}
		i := sort.Search(h.n, func(i int) bool { return h.at(i).Version > w.last })
		if i < h.n {
			e := *h.at(i)
			w.last = e.Version
			h.mu.Unlock()
			return e, nil
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-wake:
		}
	}
}

// Version is the version of the last event delivered (or the version the
// watch started from).
func (w *Watcher) Version() uint64 { return w.last }
