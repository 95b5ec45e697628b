package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/cluster/store/storetest"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/scheduler"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func openStore(t *testing.T) *store.Store { return storetest.Solo(t, nil) }

// runLoop runs l until the test ends, when Run must have returned no
// error.
func runLoop(t *testing.T, l *Loop) { runUntilEnd(t, l.Run) }

// runUntilEnd runs run in the background until the test ends, when it
// must have returned no error.
func runUntilEnd(t *testing.T, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	go func() { done <- run(ctx) }()
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, 10*time.Second, 5*time.Millisecond, cond)
}

type signals struct {
	mu    sync.Mutex
	beats map[string]time.Time
}

func (s *signals) Heartbeats() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range s.beats {
		out[k] = v
	}
	return out
}
func (s *signals) Usage() []legion.Usage { return nil }

func put(t *testing.T, s *store.Store, manifest string) {
	t.Helper()
	objs, err := legion.ParseManifest("test", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := s.Put(context.Background(), o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// putWeb puts the Service web: replicas tasks of one container running
// image.
func putWeb(t *testing.T, s *store.Store, replicas int, image string) {
	t.Helper()
	put(t, s, fmt.Sprintf(`apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: %d
  pod: {containers: [{name: web, image: %s}]}
`, replicas, image))
}

// webStore opens a store with one node, n1, and the Service web.
func webStore(t *testing.T, replicas int, image string) *store.Store {
	t.Helper()
	s := openStore(t)
	addNode(t, s, "n1")
	putWeb(t, s, replicas, image)
	return s
}

func addNode(t *testing.T, s *store.Store, name string) {
	t.Helper()
	n, _ := legion.New(legion.KindNode)
	n.GetMetadata().Name = name
	if err := legion.Admit(n); err != nil {
		t.Fatal(err)
	}
	node := n.(*legion.Node)
	node.Status = legion.NodeStatus{State: legion.NodeReady, Hostname: name,
		Platform:  legion.Platform{OS: "freebsd", Arch: "amd64"},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}, Allocatable: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}}}
	if _, _, err := s.Put(context.Background(), node, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func tasks(t *testing.T, s *store.Store) []*legion.Task {
	t.Helper()
	objs, _, err := s.List(legion.KindTask, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*legion.Task, len(objs))
	for i, o := range objs {
		out[i] = o.(*legion.Task)
	}
	return out
}

// The loop places a new service's tasks, follows a scale-down through
// the store's watch, and stops when its context ends.
func TestLoopConvergesTheStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	sig := &signals{beats: map[string]time.Time{"n1": time.Now(), "n2": time.Now()}}
	addNode(t, s, "n1")
	addNode(t, s, "n2")
	var mu sync.Mutex
	var passes []PassResult
	l := &Loop{Store: s, Signals: sig, Interval: time.Hour, LeaderSince: time.Now().Add(-time.Hour),
		Passed: func(r PassResult) { mu.Lock(); passes = append(passes, r); mu.Unlock() }}
	runLoop(t, l)

	putWeb(t, s, 3, "nginx")
	// With an hour between timed passes, only the watch can wake the loop.
	poll(t, "three placed tasks", func() bool {
		ts := tasks(t, s)
		placed := 0
		for _, task := range ts {
			if task.Spec.Node != "" && task.Spec.DesiredState == legion.TaskRunning {
				placed++
			}
		}
		return placed == 3
	})
	for _, task := range tasks(t, s) {
		if task.Spec.Owner.Name != "web" || task.Metadata.Labels[scheduler.LabelService] != "web" {
			t.Errorf("task %s: owner %+v labels %v", task.Metadata.Name, task.Spec.Owner, task.Metadata.Labels)
		}
	}
	putWeb(t, s, 1, "nginx")
	poll(t, "two tasks told to shut down", func() bool {
		down := 0
		for _, task := range tasks(t, s) {
			if task.Spec.DesiredState == legion.TaskShutdown {
				down++
			}
		}
		return down == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(passes) == 0 || passes[len(passes)-1].Errors != 0 {
		t.Fatalf("passes: %+v", passes)
	}
	// Each pass says how long it read, planned and wrote (the metrics'
	// figures).
	for _, p := range passes {
		if p.Writes > 0 && (p.Read <= 0 || p.Plan <= 0 || p.Write <= 0) {
			t.Errorf("a pass that wrote %d objects was timed read %s, plan %s, write %s", p.Writes, p.Read, p.Plan, p.Write)
		}
	}
}

// A plan computed from a version that has changed since is refused by the
// store and counted as a conflict, not an error; nothing is lost.
func TestPassCountsConflicts(t *testing.T) {
	t.Parallel()
	s := webStore(t, 1, "nginx")
	sig := &signals{beats: map[string]time.Time{"n1": time.Now()}}
	l := &Loop{Store: s, Signals: sig, LeaderSince: time.Now().Add(-time.Hour)}
	if _, err := l.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := l.Snapshot(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	plan := scheduler.Plan(st, time.Now())
	// Change every task behind the plan's back.
	for _, task := range tasks(t, s) {
		task.Status.Message = "changed"
		if _, _, err := s.Put(context.Background(), task, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stale := scheduler.Result{UpdateTasks: plan.UpdateTasks}
	if len(stale.UpdateTasks) == 0 {
		for _, task := range st.Tasks {
			c := legion.Clone(task).(*legion.Task)
			c.Status.Message = "from a stale plan"
			stale.UpdateTasks = append(stale.UpdateTasks, c)
		}
	}
	res := l.apply(context.Background(), &st, &stale)
	if res.Conflicts != len(stale.UpdateTasks) || res.Writes != 0 || res.Errors != 0 {
		t.Fatalf("stale writes: %+v, want %d conflicts", res, len(stale.UpdateTasks))
	}
	for _, task := range tasks(t, s) {
		if task.Status.Message != "changed" {
			t.Fatalf("a stale write landed: %q", task.Status.Message)
		}
	}
}
