package controller

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// Store is what the loop needs of the replicated store.
type Store interface {
	List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)
	// AppliedIndex is the version of the last entry this replica applied.
	AppliedIndex() uint64
	WriteAll(ctx context.Context, writes []store.Write) []error
	Watch(from uint64, kinds ...legion.Kind) (*store.Watcher, error)
	// CountOf counts objects of kinds in a namespace, reading none.
	CountOf(kinds []legion.Kind, namespace string) (int, error)
}

// Signals is what the planner needs that the store does not hold: the
// nodes' heartbeats and the tasks' usage reports, kept by the dispatcher
// on the leader.
type Signals interface {
	Heartbeats() map[string]time.Time
	Usage() []legion.Usage
}

// Interval is how often the loop plans when nothing else wakes it.
const Interval = 5 * time.Second

// Loop is the controller loop of one leadership term.
type Loop struct {
	Store   Store
	Signals Signals // nil: no heartbeats or usage yet
	Now     func() time.Time
	// LeaderSince is when this manager became leader: a new leader waits
	// before calling nodes down or shrinking autoscaled services.
	LeaderSince time.Time
	Interval    time.Duration // default Interval
	Logger      *slog.Logger
	// Passed, when set, is told the outcome of every pass (for tests and
	// metrics).
	Passed func(PassResult)
	// Cache, when set, is a Cache of Store that the caller runs, kept
	// from before the term began; nil: Run keeps one of its own for the
	// term, which reads the store first.
	Cache *Cache

	cache  *Cache       // Cache, or the term's own while Run runs
	cached atomic.Int64 // snapshots taken from the cache, for tests
}

// PassResult is what one pass did.
type PassResult struct {
	Writes    int // applied
	Conflicts int // refused by a precondition: the next pass recomputes
	Errors    int
	Unchanged int // updates equal to what the snapshot holds: not written
	NextWake  time.Time
	// How long the pass took to read its snapshot, to plan, and to write
	// the plan (waiting for Raft to apply it), by the clock.
	Read, Plan, Write time.Duration
}

// Run plans until ctx ends (the caller cancels it when leadership is
// lost). Store errors are logged and the loop carries on; only a closed
// store ends it early.
func (l *Loop) Run(ctx context.Context) error {
	l.defaults()
	// A cache of the term's own, unless the caller keeps one: its watch
	// ends with the term, and its error ends the loop.
	var followed chan error
	l.cache = l.Cache
	if l.cache == nil {
		l.cache = NewCache(l.Store)
		followed = make(chan error, 1)
		watchCtx, stopWatch := context.WithCancel(ctx)
		go func() { followed <- l.cache.Run(watchCtx) }()
		defer func() {
			stopWatch()
			if followed != nil {
				<-followed
			}
		}()
	}

	// The first pass comes at once when the cache holds the store already
	// (kept from before the term), otherwise once it has read the store,
	// so it plans from the cache too.
	due := l.cache.current() != nil
	timer := time.NewTimer(l.Interval)
	defer timer.Stop()
	for {
		// Taken before the pass: a change made during it wakes the next.
		changed := l.cache.planChanged()
		if due {
			res, err := l.Pass(ctx)
			if errors.Is(err, store.ErrClosed) {
				return err
			}
			if err != nil {
				l.Logger.Warn("planning pass failed", "err", err)
			}
			wait := l.Interval
			if !res.NextWake.IsZero() {
				if d := res.NextWake.Sub(l.Now()); d < wait {
					wait = max(d, time.Millisecond)
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(wait)
		}
		due = true
		select {
		case <-ctx.Done():
			return nil
		case err := <-followed: // nil (never ready) with the caller's cache
			followed = nil
			if err == nil || ctx.Err() != nil {
				return nil // cancelled: both cases were ready
			}
			if errors.Is(err, store.ErrClosed) {
				return err
			}
			return fmt.Errorf("controller: following the store: %w", err)
		case <-changed:
		case <-timer.C:
		}
	}
}

func (l *Loop) defaults() {
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Interval == 0 {
		l.Interval = Interval
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	if l.LeaderSince.IsZero() {
		l.LeaderSince = l.Now()
	}
}

// objects is the cache a pass plans from, nil while none holds the
// store (not read yet, or Run not running).
func (l *Loop) objects() *objectCache {
	if l.cache == nil {
		return nil
	}
	return l.cache.current()
}

// Snapshot is the planner's input: from the loop's cache while Run
// follows the store (once it holds every event applied, the loop's own
// last writes among them), read from the store otherwise.
func (l *Loop) Snapshot(now time.Time) (scheduler.State, error) {
	st := scheduler.State{LeaderSince: l.LeaderSince}
	if l.Signals != nil {
		st.Heartbeats = l.Signals.Heartbeats()
		st.Usage = l.Signals.Usage()
	}
	if c := l.objects(); c != nil {
		if c.fill(l.Store, &st) {
			l.cached.Add(1)
			return st, l.countObjects(&st)
		}
		st.Services, st.Jobs, st.CronJobs, st.Tasks, st.Volumes, st.Nodes, st.Namespaces, st.ImagePolicies = nil, nil, nil, nil, nil, nil, nil, nil
	}
	var err error
	read := func(kind legion.Kind, add func(legion.Object)) {
		if err != nil {
			return
		}
		var objs []legion.Object
		objs, _, err = l.Store.List(kind, "", nil)
		for _, o := range objs {
			add(o)
		}
	}
	read(legion.KindService, func(o legion.Object) { st.Services = append(st.Services, o.(*legion.Service)) })
	read(legion.KindJob, func(o legion.Object) { st.Jobs = append(st.Jobs, o.(*legion.Job)) })
	read(legion.KindCronJob, func(o legion.Object) { st.CronJobs = append(st.CronJobs, o.(*legion.CronJob)) })
	read(legion.KindTask, func(o legion.Object) { st.Tasks = append(st.Tasks, o.(*legion.Task)) })
	// Volumes before Nodes: the planner frees the Volumes of nodes missing
	// from the list, so a node that joins and claims one between the two
	// reads must be in it.
	read(legion.KindVolume, func(o legion.Object) { st.Volumes = append(st.Volumes, o.(*legion.Volume)) })
	read(legion.KindNode, func(o legion.Object) { st.Nodes = append(st.Nodes, o.(*legion.Node)) })
	read(legion.KindNamespace, func(o legion.Object) { st.Namespaces = append(st.Namespaces, o.(*legion.Namespace)) })
	read(legion.KindImagePolicy, func(o legion.Object) { st.ImagePolicies = append(st.ImagePolicies, o.(*legion.ImagePolicy)) })
	if err != nil {
		return st, err
	}
	return st, l.countObjects(&st)
}

// countObjects counts the objects of each namespace under an objects
// quota, for its status.used: the loop follows only the planner's kinds,
// so the count is read from the store, by keys alone.
func (l *Loop) countObjects(st *scheduler.State) error {
	for _, n := range st.Namespaces {
		if q := n.Spec.Quota; q == nil || q.Objects == nil {
			continue
		}
		c, err := l.Store.CountOf(legion.ObjectQuotaKinds(), n.Metadata.Name)
		if err != nil {
			return err
		}
		if st.Objects == nil {
			st.Objects = map[string]int{}
		}
		st.Objects[n.Metadata.Name] = c
	}
	return nil
}

// Pass plans once and applies the result.
func (l *Loop) Pass(ctx context.Context) (PassResult, error) {
	l.defaults()
	now := l.Now()
	// Timed by the clock, whatever Now the planner is given.
	t0 := time.Now()
	st, err := l.Snapshot(now)
	if err != nil {
		return PassResult{}, err
	}
	t1 := time.Now()
	plan := scheduler.Plan(st, now)
	t2 := time.Now()
	res := l.apply(ctx, &st, &plan)
	res.NextWake = plan.NextWake
	res.Read, res.Plan, res.Write = t1.Sub(t0), t2.Sub(t1), time.Since(t2)
	if l.Passed != nil {
		l.Passed(res)
	}
	if res.Errors > 0 {
		return res, fmt.Errorf("controller: %d writes failed", res.Errors)
	}
	return res, nil
}

// apply writes a plan in one go (raft shares appends between the
// writes): creations must not exist yet, updates and deletions must find
// the version the plan read, and a task written for a Service or Job must
// find that owner still there, so nothing is made or started for an
// owner deleted after the snapshot. An update equal to what the snapshot
// holds is not written: a write wakes every watcher, this loop included.
func (l *Loop) apply(ctx context.Context, st *scheduler.State, plan *scheduler.Result) PassResult {
	var res PassResult
	owners := ownerUIDs(st)
	var writes []store.Write
	var what []string
	add := func(kind string, w store.Write) {
		if t, ok := w.Object.(*legion.Task); ok && !w.Delete {
			k := legion.Key(t.Spec.Owner.Kind, t.Metadata.Namespace, t.Spec.Owner.Name)
			if uid, ok := owners[k]; ok {
				w.Requires = []store.Requirement{{Kind: t.Spec.Owner.Kind, Namespace: t.Metadata.Namespace, Name: t.Spec.Owner.Name, UID: uid}}
			}
		}
		writes = append(writes, w)
		what = append(what, kind)
	}
	create := func(o legion.Object) {
		add("create", store.Write{Object: o, Options: store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}}})
	}
	update := func(o legion.Object) {
		add("update", store.Write{Object: o, Options: store.WriteOptions{Precondition: store.Precondition{Version: o.GetMetadata().Version}}})
	}
	del := func(o legion.Object) {
		add("delete", store.Write{Object: o, Delete: true, Options: store.WriteOptions{Precondition: store.Precondition{Version: o.GetMetadata().Version}}})
	}
	// Volumes before the tasks that mount them; jobs before their tasks.
	for _, v := range plan.CreateVolumes {
		create(v)
	}
	for _, v := range plan.UpdateVolumes {
		update(v)
	}
	for _, j := range plan.CreateJobs {
		create(j)
	}
	for _, t := range plan.CreateTasks {
		create(t)
	}
	for _, t := range plan.UpdateTasks {
		update(t)
	}
	for _, t := range plan.DeleteTasks {
		del(t)
	}
	for _, s := range plan.UpdateServices {
		update(s)
	}
	for _, j := range plan.UpdateJobs {
		update(j)
	}
	for _, j := range plan.DeleteJobs {
		del(j)
	}
	for _, c := range plan.UpdateCronJobs {
		update(c)
	}
	for _, n := range plan.UpdateNodes {
		update(n)
	}
	for _, n := range plan.UpdateNamespaces {
		update(n)
	}
	writes, what = dropUnchanged(st, writes, what, &res)
	if len(writes) == 0 {
		return res
	}
	for i, err := range l.Store.WriteAll(ctx, writes) {
		switch {
		case err == nil:
			res.Writes++
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrNotFound):
			res.Conflicts++
		default:
			res.Errors++
			l.Logger.Warn("controller write failed", "what", what[i], "object", legion.ObjectKey(writes[i].Object), "err", err)
		}
	}
	return res
}

// ownerUIDs maps the snapshot's Services and Jobs to their uids.
func ownerUIDs(st *scheduler.State) map[string]string {
	m := make(map[string]string, len(st.Services)+len(st.Jobs))
	for _, s := range st.Services {
		m[legion.Key(legion.KindService, s.Metadata.Namespace, s.Metadata.Name)] = s.Metadata.UID
	}
	for _, j := range st.Jobs {
		m[legion.Key(legion.KindJob, j.Metadata.Namespace, j.Metadata.Name)] = j.Metadata.UID
	}
	return m
}

// dropUnchanged leaves out the updates equal to what the snapshot holds.
func dropUnchanged(st *scheduler.State, writes []store.Write, what []string, res *PassResult) ([]store.Write, []string) {
	var updates []legion.Object
	for i, w := range writes {
		if what[i] == "update" {
			updates = append(updates, w.Object)
		}
	}
	if len(updates) == 0 {
		return writes, what
	}
	orig := originalsOf(st, updates)
	keptW, keptWhat := writes[:0], what[:0]
	for i, w := range writes {
		if what[i] == "update" {
			if old := orig[keyOf(w.Object)]; old != nil && unchanged(old, w.Object) {
				res.Unchanged++
				continue
			}
		}
		keptW, keptWhat = append(keptW, w), append(keptWhat, what[i])
	}
	return keptW, keptWhat
}

// objectKey names an object without making a string of its key.
type objectKey struct {
	kind            legion.Kind
	namespace, name string
}

func keyOf(x legion.Object) objectKey {
	m := x.GetMetadata()
	return objectKey{x.GetKind(), m.Namespace, m.Name}
}

// originalsOf finds the snapshot's objects that updates replace: a task
// by a binary search of the snapshot's tasks (in the store's order, as
// the cache and a list give them), any other object by one look-up per
// object of the kinds updated, in a map of the updates. A pass updates
// up to a thousand of tens of thousands of tasks, so a scan of them all
// at each pass cost more than the searches; the other kinds hold a few
// hundred objects.
func originalsOf(st *scheduler.State, updates []legion.Object) map[objectKey]legion.Object {
	want := make(map[objectKey]legion.Object, len(updates))
	kinds := map[legion.Kind]bool{}
	for _, u := range updates {
		k := keyOf(u)
		want[k] = nil
		if k.kind != legion.KindTask {
			kinds[k.kind] = true
			continue
		}
		// A task not found (a snapshot out of order) is written as it is.
		i, ok := slices.BinarySearchFunc(st.Tasks, k, func(t *legion.Task, k objectKey) int {
			return compareKeys(t.Metadata.Namespace, t.Metadata.Name, k.namespace, k.name)
		})
		if ok {
			want[k] = st.Tasks[i]
		}
	}
	find := func(kind legion.Kind, n int, at func(int) legion.Object) {
		if !kinds[kind] {
			return
		}
		for i := range n {
			x := at(i)
			k := keyOf(x)
			if _, ok := want[k]; ok {
				want[k] = x
			}
		}
	}
	find(legion.KindService, len(st.Services), func(i int) legion.Object { return st.Services[i] })
	find(legion.KindJob, len(st.Jobs), func(i int) legion.Object { return st.Jobs[i] })
	find(legion.KindCronJob, len(st.CronJobs), func(i int) legion.Object { return st.CronJobs[i] })
	find(legion.KindNode, len(st.Nodes), func(i int) legion.Object { return st.Nodes[i] })
	find(legion.KindVolume, len(st.Volumes), func(i int) legion.Object { return st.Volumes[i] })
	return want
}

// compareKeys orders (namespace, name) pairs as their keys,
// namespace/name, sort: the store's order. No namespace holds a '/'.
func compareKeys(ns1, name1, ns2, name2 string) int {
	if ns1 == ns2 {
		return strings.Compare(name1, name2)
	}
	n := min(len(ns1), len(ns2))
	if c := strings.Compare(ns1[:n], ns2[:n]); c != 0 {
		return c
	}
	// One namespace begins the other: its key has the '/' where the
	// other's namespace goes on.
	if len(ns1) < len(ns2) {
		return cmp.Compare('/', ns2[n])
	}
	return cmp.Compare(ns1[n], '/')
}

// unchanged: the store would keep the same bytes (same JSON), so the
// write would only bump the version and wake the watchers.
func unchanged(a, b legion.Object) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, err1 := legion.MarshalJSON(a)
	y, err2 := legion.MarshalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
