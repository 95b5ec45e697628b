package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// plannerKinds are the kinds a snapshot holds, in the order they are
// read: Volumes before Nodes (see Snapshot).
var plannerKinds = []legion.Kind{legion.KindService, legion.KindJob, legion.KindCronJob, legion.KindTask,
	legion.KindVolume, legion.KindNode, legion.KindNamespace, legion.KindImagePolicy}

// catchUpWait bounds how long a pass waits for the cache to take the
// events the store has applied (its own last writes among them) before
// it reads the store instead.
const catchUpWait = 2 * time.Second

// objectCache holds the planner's kinds as the loop's watch leaves them,
// so a pass costs no reading and decoding of every object: at 20,000
// tasks a pass that listed them spent ten times longer decoding than
// planning, and during a rollout a pass follows every burst of writes.
type objectCache struct {
	mu      sync.Mutex
	objs    map[legion.Kind]map[string]legion.Object // but Tasks
	tasks   *taskOrder
	listed  map[legion.Kind]uint64 // the version each kind was listed at
	at      uint64                 // the last event taken
	changed chan struct{}          // closed at the next event taken
}

// Cache keeps the planner's objects from the store's watch for as long
// as Run runs. A manager keeps one whether it leads or not, so the loop of
// a new leader plans at once from what it holds: reading 60,000 tasks
// cost a new leader 2.2 s of a failover in the scale run
// (internal/scale), before its first pass. The objects are those the
// store's events carry, decoded by the store already.
type Cache struct {
	store Store

	mu   sync.Mutex
	objs *objectCache  // nil until read, and while read again
	wake chan struct{} // closed and replaced at each change a pass plans from
}

// NewCache makes a Cache of st; it holds nothing until Run has read st.
func NewCache(st Store) *Cache {
	return &Cache{store: st, wake: make(chan struct{})}
}

// Run reads the store, then follows its events until ctx ends; it reads
// everything again when the watch falls behind. It returns nil when ctx
// ends, and the store's error otherwise (store.ErrClosed once closed).
func (c *Cache) Run(ctx context.Context) error {
	defer c.set(nil)
	for {
		objs, w, err := loadCache(c.store)
		if err != nil {
			if errors.Is(err, store.ErrCompacted) {
				continue
			}
			return err
		}
		c.set(objs)
		c.signal()
		for {
			var ev store.Event
			if ev, err = w.Next(ctx); err != nil {
				break
			}
			if objs.take(ev) {
				c.signal()
			}
		}
		c.set(nil)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, store.ErrCompacted), errors.Is(err, store.ErrReset):
			c.signal()
			continue
		default:
			return err
		}
	}
}

func (c *Cache) set(objs *objectCache) {
	c.mu.Lock()
	c.objs = objs
	c.mu.Unlock()
}

// current is what the cache holds, nil while it holds nothing.
func (c *Cache) current() *objectCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objs
}

// planChanged is closed at the next change a pass plans from (or the
// next read of the store): a burst of events wakes a waiting loop once.
// (objectCache.changed, which fill waits on, is closed at every event.)
func (c *Cache) planChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wake
}

func (c *Cache) signal() {
	c.mu.Lock()
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
}

// loadCache lists the planner's kinds and returns them with a watch from
// before the first list; events a list already holds are skipped by
// take.
func loadCache(st Store) (*objectCache, *store.Watcher, error) {
	_, from, err := st.List(legion.KindNamespace, "", func(legion.Object) bool { return false })
	if err != nil {
		return nil, nil, err
	}
	w, err := st.Watch(store.AfterRead(from), plannerKinds...)
	if err != nil {
		return nil, nil, err
	}
	c := &objectCache{objs: map[legion.Kind]map[string]legion.Object{}, listed: map[legion.Kind]uint64{},
		at: from, changed: make(chan struct{})}
	for _, k := range plannerKinds {
		objs, at, err := st.List(k, "", nil)
		if err != nil {
			return nil, nil, err
		}
		c.listed[k] = at
		if k == legion.KindTask {
			c.tasks = newTaskOrder(len(objs))
			for _, o := range objs {
				c.tasks.put(cacheKey(o), o.(*legion.Task))
			}
			continue
		}
		m := make(map[string]legion.Object, len(objs))
		for _, o := range objs {
			m[cacheKey(o)] = o
		}
		c.objs[k] = m
	}
	return c, w, nil
}

func cacheKey(o legion.Object) string {
	md := o.GetMetadata()
	return md.Namespace + "/" + md.Name
}

// take applies one event and reports whether it changed what a pass
// plans from. The cache watches the planner's kinds only: a Config, a
// Secret or an audit batch leaves the plan as it was, and its write
// does not wake the watch either.
func (c *objectCache) take(ev store.Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = max(c.at, ev.Version)
	close(c.changed)
	c.changed = make(chan struct{})
	k := ev.Object.GetKind()
	listed, ok := c.listed[k]
	if !ok || ev.Version <= listed {
		return false // not a planner kind, or in the list already
	}
	if k == legion.KindTask {
		if ev.Type == store.Deleted {
			c.tasks.remove(cacheKey(ev.Object))
		} else {
			c.tasks.put(cacheKey(ev.Object), ev.Object.(*legion.Task))
		}
		return true
	}
	m := c.objs[k]
	if ev.Type == store.Deleted {
		delete(m, cacheKey(ev.Object))
		return true
	}
	m[cacheKey(ev.Object)] = ev.Object
	return true
}

// caughtUp reports whether the cache has taken every event of the
// planner's kinds up to version target, or every one the store holds
// (the entries after the last may make none, or only other kinds).
func (c *objectCache) caughtUp(st Store, target uint64) (bool, <-chan struct{}) {
	c.mu.Lock()
	at, ch := c.at, c.changed
	c.mu.Unlock()
	if at >= target {
		return true, ch
	}
	w, err := st.Watch(store.AfterRead(at), plannerKinds...)
	if err != nil {
		return false, ch
	}
	drained, cancel := context.WithCancel(context.Background())
	cancel() // Next returns at once: an event, or nothing pending
	_, err = w.Next(drained)
	return errors.Is(err, context.Canceled), ch
}

// fill copies the cache into st once it holds what the store had applied
// when fill was called, reporting false when it does not within
// catchUpWait. Events written meanwhile need not be waited for: under a
// stream of reports there would always be one more.
func (c *objectCache) fill(src Store, st *scheduler.State) bool {
	// The applied index, not a list's version: a list, even of one small
	// kind, opens a read and walks the writes not yet in the file.
	target := src.AppliedIndex()
	deadline := time.NewTimer(catchUpWait)
	defer deadline.Stop()
	for {
		ok, changed := c.caughtUp(src, target)
		if ok {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.objs[legion.KindService] {
		st.Services = append(st.Services, o.(*legion.Service))
	}
	for _, o := range c.objs[legion.KindJob] {
		st.Jobs = append(st.Jobs, o.(*legion.Job))
	}
	for _, o := range c.objs[legion.KindCronJob] {
		st.CronJobs = append(st.CronJobs, o.(*legion.CronJob))
	}
	// In the store's order, as a list gives them: the planner files an
	// owner's tasks faster when they come together.
	st.Tasks = c.tasks.sorted()
	for _, o := range c.objs[legion.KindVolume] {
		st.Volumes = append(st.Volumes, o.(*legion.Volume))
	}
	for _, o := range c.objs[legion.KindNode] {
		st.Nodes = append(st.Nodes, o.(*legion.Node))
	}
	for _, o := range c.objs[legion.KindNamespace] {
		st.Namespaces = append(st.Namespaces, o.(*legion.Namespace))
	}
	for _, o := range c.objs[legion.KindImagePolicy] {
		st.ImagePolicies = append(st.ImagePolicies, o.(*legion.ImagePolicy))
	}
	return true
}
