package events

import (
	"sort"
	"time"

	"github.com/legionbsd/legion"
)

// Tracker keeps the last state of each tracked object, so that a change
// is compared with what it replaced. The objects are the store's own,
// shared: it never changes them.
type Tracker struct {
	objs map[string]legion.Object
}

// NewTracker starts from objs (a listing) without deriving anything.
func NewTracker(objs []legion.Object) *Tracker {
	t := &Tracker{objs: map[string]legion.Object{}}
	for _, o := range objs {
		if Tracked(o.GetKind()) {
			t.objs[legion.ObjectKey(o)] = o
		}
	}
	return t
}

// Change takes one applied change (for a deletion, o is the object as it
// was) and returns its events.
func (t *Tracker) Change(o legion.Object, deleted bool, now time.Time) []legion.Event {
	if !Tracked(o.GetKind()) {
		return nil
	}
	key := legion.ObjectKey(o)
	old := t.objs[key]
	if deleted {
		delete(t.objs, key)
		if old == nil {
			old = o
		}
		return Derive(old, nil, now)
	}
	t.objs[key] = o
	return Derive(old, o, now)
}

// Resync replaces what the tracker knows with a fresh listing, when the
// change feed lost its place, and returns the events of the difference,
// by key.
func (t *Tracker) Resync(objs []legion.Object, now time.Time) []legion.Event {
	next := NewTracker(objs).objs
	keys := make([]string, 0, len(next)+len(t.objs))
	for k := range next {
		keys = append(keys, k)
	}
	for k := range t.objs {
		if _, ok := next[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []legion.Event
	for _, k := range keys {
		old, nw := t.objs[k], next[k]
		if nw == nil {
			out = append(out, Derive(old, nil, now)...)
			continue
		}
		out = append(out, Derive(old, nw, now)...)
	}
	t.objs = next
	return out
}
