package scale

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// tally keeps the scenarios' tasks as the leader's replica tells of them
// in its events, so that a look at where the cluster is costs a pass over
// a map, where Count decodes every task: with 20,000 tasks a Count takes a
// good part of a core, on the same cores as the cluster it measures.
//
// It reads the tasks once from the leader's replica, then follows that
// replica's events; when the replica closes or stops leading (its manager
// killed) or its history no longer reaches back, it starts again from
// whichever manager leads then. WaitFor confirms with a Count what the
// tally says before it answers, so the tally decides only when to look.
type tally struct {
	h *Harness

	offers chan *store.Store // the leader's replica, when following none

	mu        sync.Mutex
	following bool                 // a replica was offered and is followed
	synced    bool                 // tasks is what that replica holds, followed since
	tasks     map[string]taskState // by name
	// What counts adds up, kept as tasks change, so that a look costs a
	// pass over the nodes, not over every task: the running tasks, in
	// all, by image and by node.
	running int
	byImage map[string]int
	byNode  map[string]int
}

// set records a task's state (gone: it was deleted), keeping the sums.
// Called with mu held.
func (y *tally) set(name string, s taskState, gone bool) {
	if old, ok := y.tasks[name]; ok {
		y.sum(old, -1)
	}
	if gone {
		delete(y.tasks, name)
		return
	}
	y.tasks[name] = s
	y.sum(s, 1)
}

// sum adds d of a task in state s to the sums.
func (y *tally) sum(s taskState, d int) {
	if !s.running {
		return
	}
	y.running += d
	y.byImage[s.image] += d
	y.byNode[s.node] += d
}

// taskState is what Counts.add needs of a task.
type taskState struct {
	running bool // told to run, running and ready
	node    string
	image   string
}

func stateOf(t *legion.Task) taskState {
	s := taskState{node: t.Spec.Node,
		running: t.Spec.DesiredState == legion.TaskRunning && t.Status.State == legion.TaskRunning && t.Status.Ready}
	if len(t.Spec.Pod.Containers) > 0 {
		s.image = t.Spec.Pod.Containers[0].Image
	}
	return s
}

// follow keeps the tally from the replicas offered until ctx ends.
func (y *tally) follow(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case st := <-y.offers:
			y.followStore(ctx, st)
			y.mu.Lock()
			y.synced, y.following = false, false
			y.mu.Unlock()
		}
	}
}

// offer hands the tally the leader's replica when it follows none. The
// test's goroutine finds the leader: the cluster's managers are its.
func (y *tally) offer(leader func() *store.Store) {
	y.mu.Lock()
	if y.following {
		y.mu.Unlock()
		return
	}
	y.following = true
	y.mu.Unlock()
	y.offers <- leader()
}

// followStore reads the tasks from st and follows its events until it
// closes, falls behind, no longer leads or ctx ends.
func (y *tally) followStore(ctx context.Context, st *store.Store) {
	if st == nil {
		return
	}
	objs, at, err := st.List(legion.KindTask, Namespace, nil)
	if err != nil {
		return
	}
	w, err := st.Watch(at)
	if err != nil {
		return
	}
	y.mu.Lock()
	y.tasks, y.running, y.byImage, y.byNode = make(map[string]taskState, len(objs)), 0, map[string]int{}, map[string]int{}
	for _, o := range objs {
		y.set(o.GetMetadata().Name, stateOf(o.(*legion.Task)), false)
	}
	y.synced = true
	y.mu.Unlock()
	for {
		// A killed manager's replica may never say it closed: every
		// second without an event, it must still lead.
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		ev, err := w.Next(nctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if !st.IsLeader() {
				return
			}
			continue
		case err != nil:
			y.h.t.Logf("tally: reading the leader's replica again: %v", err)
			return
		}
		t, ok := ev.Object.(*legion.Task)
		if !ok || t.Metadata.Namespace != Namespace {
			continue
		}
		y.mu.Lock()
		y.set(t.Metadata.Name, stateOf(t), ev.Type == store.Deleted)
		y.mu.Unlock()
	}
}

// counts is Count from the tally; ok is false while it is not following
// a replica.
func (y *tally) counts(tag string, nodes map[string]bool) (c Counts, ok bool) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if !y.synced {
		return Counts{}, false
	}
	c.Running, c.Other = y.running, len(y.tasks)-y.running
	c.AtTag, c.OnNodes = y.running, y.running
	if image := imageAt(tag); image != "" {
		c.AtTag = y.byImage[image]
	}
	if nodes != nil {
		c.OnNodes = 0
		for n := range nodes {
			c.OnNodes += y.byNode[n]
		}
	}
	return c, true
}
