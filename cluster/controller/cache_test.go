package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/cluster/store/storetest"
	"github.com/legionbsd/legion/scheduler"
)

// countingStore counts the lists of Tasks a loop makes.
type countingStore struct {
	Store
	taskLists atomic.Int64
}

func (s *countingStore) List(kind legion.Kind, ns string, keep func(legion.Object) bool) ([]legion.Object, uint64, error) {
	if kind == legion.KindTask {
		s.taskLists.Add(1)
	}
	return s.Store.List(kind, ns, keep)
}

// A service grows by more than one pass's worth of tasks (the planner
// makes at most MaxCreatesPerPass per pass) and the loop passes after
// each burst of writes; the tasks are read from the store once, when the loop starts,
// and every pass after works from the watch's events: a pass that read
// and decoded every task cost more than planning at 20,000 tasks. Each
// pass also sees the loop's own last writes, or it would make the same
// slots' tasks again.
func TestPassesPlanFromTheWatchNotFromLists(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	addNode(t, s, "n1")
	addNode(t, s, "n2")
	cs := &countingStore{Store: s}
	sig := &signals{beats: map[string]time.Time{"n1": time.Now(), "n2": time.Now()}}
	var mu sync.Mutex
	var passes, conflicts int
	l := &Loop{Store: cs, Signals: sig, Interval: time.Hour, LeaderSince: time.Now().Add(-time.Hour),
		Passed: func(r PassResult) { mu.Lock(); passes++; conflicts += r.Conflicts; mu.Unlock() }}
	runLoop(t, l)

	const replicas = 2*scheduler.MaxCreatesPerPass + 100
	putWeb(t, s, replicas, "nginx")
	poll(t, "every task placed", func() bool {
		placed := 0
		for _, task := range tasks(t, s) {
			if task.Spec.Node != "" && task.Spec.DesiredState == legion.TaskRunning {
				placed++
			}
		}
		return placed == replicas
	})
	if n := len(tasks(t, s)); n != replicas {
		t.Fatalf("%d tasks for %d replicas", n, replicas)
	}
	mu.Lock()
	p, c := passes, conflicts
	mu.Unlock()
	if p < 3 {
		t.Fatalf("%d passes: want at least 3 for %d tasks", p, replicas)
	}
	if got := cs.taskLists.Load(); got != 1 {
		t.Fatalf("tasks listed %d times in %d passes: want once, when the loop started", got, p)
	}
	if got := l.cached.Load(); got < int64(p) {
		t.Fatalf("%d of %d passes planned from the cache", got, p)
	}
	if c != 0 {
		t.Fatalf("%d writes refused: a pass planned without the last one's writes", c)
	}
}

// A loop given a Cache that holds the store already (a manager keeps
// one whether it leads or not) plans at once, from the cache, without
// reading the tasks again and without waiting for a change: the new
// leader of a failover starts where the old one stopped.
func TestLoopPlansAtOnceFromACacheKeptBeforeTheTerm(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	addNode(t, s, "n1")
	putWeb(t, s, 3, "nginx")
	cs := &countingStore{Store: s}
	cache := NewCache(cs)
	runUntilEnd(t, cache.Run)
	poll(t, "the cache's first read", func() bool { return cache.current() != nil })
	if got := cs.taskLists.Load(); got != 1 {
		t.Fatalf("the cache listed the tasks %d times: want once", got)
	}

	// Nothing is written from here on, and the timer is an hour away:
	// only a pass made at once places the tasks.
	var passes atomic.Int64
	l := &Loop{Store: cs, Cache: cache, Interval: time.Hour, LeaderSince: time.Now().Add(-time.Hour),
		Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}},
		Passed:  func(PassResult) { passes.Add(1) }}
	runLoop(t, l)
	poll(t, "a first pass", func() bool { return passes.Load() > 0 })
	poll(t, "every task placed", func() bool {
		placed := 0
		for _, task := range tasks(t, s) {
			if task.Spec.Node == "n1" {
				placed++
			}
		}
		return placed == 3
	})
	if got := cs.taskLists.Load(); got != 1 {
		t.Fatalf("tasks listed %d times: the loop read the store instead of the cache it was given", got)
	}
	if got := l.cached.Load(); got < passes.Load() {
		t.Fatalf("%d of %d passes planned from the cache", got, passes.Load())
	}
}

// After tasks are made, changed, deleted and made again, in namespaces
// whose names sort apart from their keys ("a" and "a-b"), a pass's tasks
// from the cache are the store's list: the same tasks at the same
// versions, in the same order.
func TestCacheTasksAreTheStoresList(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	write := func(ns, name string, del bool) {
		t.Helper()
		if del {
			if _, err := s.Delete(ctx, legion.KindTask, ns, name, store.Precondition{}); err != nil {
				t.Fatal(err)
			}
			return
		}
		task := orderTask(ns, name, 0)
		task.APIVersion = legion.APIVersion
		task.Spec.DesiredState = legion.TaskRunning
		task.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1"}}
		if _, _, err := s.Put(ctx, task, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"a-b", "a", "default"} {
		for i := range 5 {
			write(ns, fmt.Sprintf("web-%d", i), false)
		}
	}
	c, w, err := loadCache(s)
	if err != nil {
		t.Fatal(err)
	}
	follow := func() {
		t.Helper()
		for {
			drained, cancel := context.WithCancel(ctx)
			cancel()
			ev, err := w.Next(drained)
			if err != nil {
				return
			}
			c.take(ev)
		}
	}
	check := func(when string) {
		t.Helper()
		follow()
		var st scheduler.State
		if !c.fill(s, &st) {
			t.Fatalf("%s: the cache did not catch up", when)
		}
		list, _, err := s.List(legion.KindTask, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, task := range st.Tasks {
			got = append(got, fmt.Sprintf("%s/%s@%d", task.Metadata.Namespace, task.Metadata.Name, task.Metadata.Version))
		}
		for _, o := range list {
			m := o.GetMetadata()
			want = append(want, fmt.Sprintf("%s/%s@%d", m.Namespace, m.Name, m.Version))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the cache's tasks\n%v\nthe store's list\n%v", when, got, want)
		}
	}
	check("as listed")
	write("a", "web-1", false)
	write("a-b", "web-7", false)
	write("a", "web-2", true)
	write("default", "web-0", true)
	check("after changes")
	write("default", "web-0", false)
	write("a", "web-2", false)
	write("a-b", "web-3", true)
	write("b", "web-1", false)
	check("after more")
}

// A write the planner does not read (a Config here; Secrets, Roles and the
// audit's batches alike) must not wake the loop: under a stream of such
// writes every one cost a whole pass. The cache's watch is of the
// planner's kinds, so such writes do not even reach it, and a pass
// waiting for the store's last version is not held up by them. A write
// of a kind it plans from wakes it.
func TestOnlyPlannerKindsWakeTheLoop(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	cache := NewCache(s)
	changed := cache.planChanged()
	runUntilEnd(t, cache.Run)
	wake := func(what string) {
		t.Helper()
		select {
		case <-changed:
			changed = cache.planChanged()
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the loop was not woken", what)
		}
	}
	wake("the first read")
	c := cache.current()
	c.mu.Lock()
	before := c.at
	c.mu.Unlock()

	for i := range 20 {
		put(t, s, fmt.Sprintf("apiVersion: legion/v1\nkind: Config\nmetadata: {name: c%d}\nspec: {text: x}\n", i))
	}
	var st scheduler.State
	if !c.fill(s, &st) {
		t.Fatal("a pass after the Configs waited for events the cache does not watch")
	}
	select {
	case <-changed:
		t.Fatal("Configs woke the loop: a pass plans nothing from them")
	default:
	}
	c.mu.Lock()
	at := c.at
	c.mu.Unlock()
	if at != before {
		t.Fatalf("the cache took events up to %d after only Configs were written (from %d): its watch is not of the planner's kinds", at, before)
	}

	addNode(t, s, "n1")
	wake("a Node")
	put(t, s, "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: team}\n")
	wake("a Namespace")
}

// A cache read before the store applied anything (version 0, as the
// loop's first read of a store just elected may be) follows the store
// from there: it is caught up after writes it does not watch, and its
// watch gives what is written of its kinds after them.
func TestACacheReadAtVersionZero(t *testing.T) {
	t.Parallel()
	s, lead := storetest.Unelected(t, nil)
	c, w, err := loadCache(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.at != 0 {
		t.Fatalf("read at %d before the store's first entry, want 0", c.at)
	}
	lead()
	for i := range 3 {
		put(t, s, fmt.Sprintf("apiVersion: legion/v1\nkind: Config\nmetadata: {name: c%d}\nspec: {text: x}\n", i))
	}
	var st scheduler.State
	if !c.fill(s, &st) {
		t.Fatal("a cache read at version 0 was not caught up after writes it does not watch")
	}
	put(t, s, "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: team}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("the watch from the read at 0: %v", err)
	}
	if ev.Object.GetKind() != legion.KindNamespace || ev.Object.GetMetadata().Name != "team" {
		t.Fatalf("the watch's first event is %s %s, want the Namespace team", ev.Object.GetKind(), ev.Object.GetMetadata().Name)
	}
}
