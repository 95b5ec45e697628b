package audit

import (
	"log/slog"
	"sync"
)

// DefaultHold is how many events a manager holds that it could not hand
// on yet; past it the oldest are dropped.
const DefaultHold = 10000

// Recorder holds the events a manager recorded (and, on the leader, those
// the followers handed it) until they are written or handed on.
type Recorder struct {
	max int
	log *slog.Logger

	mu      sync.Mutex
	events  []Event
	dropped uint64 // since the last report in the log
	// pressed is signalled when a quarter of the limit is held, so the
	// flusher writes before its period ends: at thousands of writes a
	// second a period's events would otherwise reach the limit and the
	// oldest be dropped.
	pressed chan struct{}
}

// pressureShare is the part of the limit held at which the recorder asks
// for an early flush (see Pressed).
const pressureShare = 4

// NewRecorder holds up to max events (DefaultHold when max <= 0).
func NewRecorder(max int, log *slog.Logger) *Recorder {
	if max <= 0 {
		max = DefaultHold
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{max: max, log: log, pressed: make(chan struct{}, 1)}
}

// Pressed is signalled when enough events are held that they should be
// written before the flusher's next period.
func (r *Recorder) Pressed() <-chan struct{} { return r.pressed }

// Record adds events, dropping the oldest held beyond the limit.
func (r *Recorder) Record(events ...Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		r.events = append(r.events, e.trimmed())
	}
	r.trim()
	if len(r.events) >= r.max/pressureShare {
		select {
		case r.pressed <- struct{}{}:
		default: // already asked
		}
	}
}

// Take removes and returns everything held, oldest first.
func (r *Recorder) Take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	// The next round likely holds as many: growing the slice to that
	// again copies what it holds a dozen times over.
	r.events = make([]Event, 0, cap(out))
	if r.dropped > 0 {
		r.log.Warn("audit events dropped: more were held than the limit while they could not be written", "dropped", r.dropped, "limit", r.max)
		r.dropped = 0
	}
	return out
}

// PutBack returns events Take gave that could not be written, ahead of
// what was recorded since; the oldest go first if that is too many.
func (r *Recorder) PutBack(events []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(append([]Event(nil), events...), r.events...)
	r.trim()
}

// Len is how many events are held.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// trim drops the oldest events beyond the limit. It moves the slice's
// start rather than copying what is kept: at the limit every Record
// trims, and a copy of the whole buffer under the lock each time made
// every API call wait in turn.
func (r *Recorder) trim() {
	if over := len(r.events) - r.max; over > 0 {
		clear(r.events[:over]) // what they hold can be collected
		r.events = r.events[over:]
		r.dropped += uint64(over)
	}
}
