package controller

import (
	"slices"
	"strings"

	"github.com/legionbsd/legion"
)

// taskOrder holds the cache's tasks in the store's order (by cache key,
// as a list gives them) from one pass to the next. A pass used to copy
// every task out of a map and sort them all: at 40,000-60,000 tasks
// during a rollout that was most of the cost of reading the cache. Now a
// change to a task replaces it where it lies, and only the tasks made
// since the last pass are sorted, then merged in.
type taskOrder struct {
	// slots is sorted by key: every task at the last pass, and the slots
	// of tasks deleted since (task nil), dropped at the next merge.
	slots []*taskSlot
	added []*taskSlot          // tasks made since the last pass, unsorted
	byKey map[string]*taskSlot // every task there is
}

// taskSlot is one task's place in the order.
type taskSlot struct {
	key  string
	task *legion.Task // nil once deleted
}

func newTaskOrder(n int) *taskOrder {
	return &taskOrder{byKey: make(map[string]*taskSlot, n)}
}

// put makes t the task at key, in its place or, when it is new, in the
// order from the next pass.
func (o *taskOrder) put(key string, t *legion.Task) {
	if s, ok := o.byKey[key]; ok {
		s.task = t
		return
	}
	s := &taskSlot{key: key, task: t}
	o.byKey[key] = s
	o.added = append(o.added, s)
}

// remove deletes the task at key, if there is one.
func (o *taskOrder) remove(key string) {
	if s, ok := o.byKey[key]; ok {
		s.task = nil
		delete(o.byKey, key)
	}
}

// sorted returns every task in key order, in a slice of the caller's
// own.
func (o *taskOrder) sorted() []*legion.Task {
	if len(o.added) > 0 || len(o.slots) != len(o.byKey) {
		o.merge()
	}
	out := make([]*legion.Task, len(o.slots))
	for i, s := range o.slots {
		out[i] = s.task
	}
	return out
}

// merge sorts the tasks made since the last pass into the order and
// drops the slots of deleted ones.
func (o *taskOrder) merge() {
	byKey := func(a, b *taskSlot) int { return strings.Compare(a.key, b.key) }
	added := slices.DeleteFunc(o.added, func(s *taskSlot) bool { return s.task == nil })
	slices.SortFunc(added, byKey)
	merged := make([]*taskSlot, 0, len(o.byKey))
	i, j := 0, 0
	for i < len(o.slots) || j < len(added) {
		var s *taskSlot
		if j == len(added) || (i < len(o.slots) && o.slots[i].key < added[j].key) {
			s, i = o.slots[i], i+1
		} else {
			s, j = added[j], j+1
		}
		if s.task != nil {
			merged = append(merged, s)
		}
	}
	clear(o.added) // its slots are in merged now (or dropped)
	o.slots, o.added = merged, o.added[:0]
}
