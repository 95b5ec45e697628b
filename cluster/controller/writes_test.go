package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// warnCounter counts the WARN records logged, by message.
type warnCounter struct {
	mu    sync.Mutex
	warns int
}

func (h *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		h.warns++
		h.mu.Unlock()
	}
	return nil
}
func (h *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnCounter) WithGroup(string) slog.Handler      { return h }

// alive: the nodes named have just sent a heartbeat, whenever asked.
type alive []string

func (a alive) Heartbeats() map[string]time.Time {
	m := map[string]time.Time{}
	for _, n := range a {
		m[n] = time.Now()
	}
	return m
}
func (alive) Usage() []legion.Usage { return nil }

// runUntil runs fn in the background until the test ends.
func runUntil(t *testing.T, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	go func() { done <- fn(ctx) }()
}

// resolverWrites is how many Raft entries at most a resolver and a loop
// may write in resolverWindow for two owners whose images never resolve:
// each owner's status three times (the loop's first, the resolver's
// failure, the loop's message saying no task starts), each of those at
// most once refused because the other wrote first (a refused write is a
// log entry too). 6 measured on a quiet machine; a resolver writing at
// each retry would write 10 more. The window is 30 first retry delays,
// as 30 s is of the production one (RetryFirst): the same five retries,
// in a fifth of the time.
const (
	resolverWrites = 12
	resolverRetry  = 200 * time.Millisecond
	resolverWindow = 30 * resolverRetry
)

// An image that never resolves (a registry that refuses; a reference that
// does not parse) costs a write when its failure is first recorded, then
// none: retries back off from the first delay, doubling, and the same
// error is logged once. Seconds of real time, so the test runs in
// parallel.
func TestFailingImagesWriteOnceAndBackOff(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	n, _ := legion.New(legion.KindNode)
	n.GetMetadata().Name = "n1"
	if err := legion.Admit(n); err != nil {
		t.Fatal(err)
	}
	node := n.(*legion.Node)
	node.Status = legion.NodeStatus{State: legion.NodeReady, Hostname: "n1", ImagePins: true,
		Platform:  legion.Platform{OS: "freebsd", Arch: "amd64"},
		Resources: legion.NodeResources{Allocatable: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}}}
	if _, _, err := s.Put(context.Background(), node, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: down}
spec:
  pod: {containers: [{name: c, image: docker.io/library/nginx:1.27}]}
`)
	// Admission refuses such a reference now; one stored before it did
	// goes to the store as it is.
	long := "registry.example/" + strings.Repeat("x", 5000) + ":1!"
	objs, err := legion.ParseManifest("test", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: bad}
spec:
  pod: {containers: [{name: c, image: registry.example/x:1}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	badSvc := objs[0].(*legion.Service)
	badSvc.Spec.Pod.Containers[0].Image = long
	if _, _, err := s.Put(context.Background(), badSvc, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		mu.Lock()
		calls[ref]++
		mu.Unlock()
		if _, err := name.ParseReference(ref); err != nil {
			return "", err
		}
		return "", errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}
	logs := &warnCounter{}
	start := s.AppliedIndex()
	res := &ImageResolver{Store: s, Resolve: resolve, Logger: slog.New(logs), Retry: resolverRetry}
	runUntil(t, res.Run)
	l := &Loop{Store: s, Signals: alive{"n1"}, LeaderSince: time.Now().Add(-time.Hour)}
	runUntil(t, l.Run)
	began := time.Now()
	for time.Since(began) < resolverWindow {
		time.Sleep(100 * time.Millisecond) // the window itself is what is measured
		if w := s.AppliedIndex() - start; w > resolverWrites {

			t.Fatalf("%d Raft writes after %s, want at most %d", w, time.Since(began).Round(time.Millisecond), resolverWrites)
		}
	}
	writes := s.AppliedIndex() - start
	mu.Lock()
	down, bad := calls["docker.io/library/nginx:1.27"], calls[long]
	mu.Unlock()
	logs.mu.Lock()
	warns := logs.warns
	logs.mu.Unlock()
	t.Logf("in %s: %d Raft writes, %d and %d resolutions, %d WARN lines", resolverWindow, writes, down, bad, warns)
	// 1+2+4+8+16 delays: attempts at 0, 1, 3, 7, 15 and 31 of them.
	for what, n := range map[string]int{"unreachable": down, "bad reference": bad} {
		if n < 4 || n > 6 {
			t.Errorf("%s image resolved %d times in %s, want 4 to 6 (backing off from %s)", what, n, resolverWindow, resolverRetry)
		}
	}
	if warns != 2 {
		t.Errorf("%d WARN lines, want 2 (one per owner, its error unchanged)", warns)
	}
	for _, svc := range []string{"down", "bad"} {
		o, _, err := s.Get(legion.KindService, "default", svc)
		if err != nil {
			t.Fatal(err)
		}
		if im := o.(*legion.Service).Status.Images; im == nil || !strings.HasPrefix(im.Message, "cannot resolve") {
			t.Errorf("service %s: images status %+v, want the failure recorded", svc, im)
		} else if strings.Contains(im.Message, "did not answer within") {
			t.Errorf("service %s: %q: a refused connection or a bad reference is not a silent registry", svc, im.Message)
		}
	}
	if n := len(tasks(t, s)); n != 0 {
		t.Errorf("%d tasks made for pods whose images are unresolved", n)
	}
}

// The retry delay doubles from the first to the cap.
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	got := []time.Duration{}
	for i := 1; i <= 11; i++ {
		got = append(got, retryDelay(RetryFirst, RetryMax, i))
	}
	want := "[1s 2s 4s 8s 16s 32s 1m4s 2m8s 4m16s 5m0s 5m0s]"
	if fmt.Sprint(got) != want {
		t.Fatalf("delays %v, want %s", got, want)
	}
}

// A spec change starts the backoff over: the owner is tried at once.
func TestSpecChangeResetsBackoff(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	put(t, s, `apiVersion: legion/v1
kind: Job
metadata: {name: j}
spec:
  pod: {containers: [{name: c, image: example.org/a:1}]}
`)
	now := time.Now()
	var calls atomic.Int32
	res := &ImageResolver{Store: s, Now: func() time.Time { return now },
		Resolve: func(context.Context, string, [][]byte) (string, error) {
			calls.Add(1)
			return "", errors.New("refused")
		}}
	res.Pass(context.Background())
	before := s.AppliedIndex()
	for range 3 {
		res.Pass(context.Background())
	}
	if calls.Load() != 1 || s.AppliedIndex() != before {
		t.Fatalf("%d attempts and %d writes within the first retry delay, want 1 and 0", calls.Load(), s.AppliedIndex()-before)
	}
	now = now.Add(RetryFirst)
	res.Pass(context.Background())
	if calls.Load() != 2 || s.AppliedIndex() != before {
		t.Fatalf("after %s: %d attempts and %d writes, want 2 and 0 (same failure)", RetryFirst, calls.Load(), s.AppliedIndex()-before)
	}
	put(t, s, `apiVersion: legion/v1
kind: Job
metadata: {name: j}
spec:
  pod: {containers: [{name: c, image: example.org/a:2}]}
`)
	res.Pass(context.Background())
	if calls.Load() != 3 {
		t.Fatalf("%d attempts after the spec changed, want 3 (tried at once)", calls.Load())
	}
}

// An update equal to what the snapshot holds is not written.
func TestApplySkipsUnchangedUpdates(t *testing.T) {
	t.Parallel()
	s := webStore(t, 2, "localhost/web:1")
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, LeaderSince: time.Now().Add(-time.Hour)}
	if _, err := l.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := l.Snapshot(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	same := scheduler.Result{}
	for _, task := range st.Tasks {
		same.UpdateTasks = append(same.UpdateTasks, legion.Clone(task).(*legion.Task))
	}
	for _, svc := range st.Services {
		same.UpdateServices = append(same.UpdateServices, legion.Clone(svc).(*legion.Service))
	}
	for _, n := range st.Nodes {
		same.UpdateNodes = append(same.UpdateNodes, legion.Clone(n).(*legion.Node))
	}
	before := s.AppliedIndex()
	res := l.apply(context.Background(), &st, &same)
	want := len(same.UpdateTasks) + len(same.UpdateServices) + len(same.UpdateNodes)
	if res.Unchanged != want || res.Writes != 0 || s.AppliedIndex() != before {
		t.Fatalf("unchanged updates: %+v and %d entries, want %d unchanged and none written", res, s.AppliedIndex()-before, want)
	}

	// Among them one changed task: it alone is written.
	changed := same.UpdateTasks[1]
	changed.Spec.DesiredState = legion.TaskShutdown
	res = l.apply(context.Background(), &st, &same)
	if res.Unchanged != want-1 || res.Writes != 1 || res.Conflicts+res.Errors != 0 {
		t.Fatalf("one changed update among unchanged ones: %+v, want %d unchanged and 1 written", res, want-1)
	}
	got, _, err := s.Get(legion.KindTask, changed.Metadata.Namespace, changed.Metadata.Name)
	if err != nil || got.(*legion.Task).Spec.DesiredState != legion.TaskShutdown {
		t.Fatalf("the changed task as stored: %v, %v", got, err)
	}
}

// A plan read before its Service was deleted makes none of its tasks:
// each write requires the owner the plan read.
func TestApplyRefusesTasksOfDeletedOwner(t *testing.T) {
	t.Parallel()
	s := webStore(t, 3, "localhost/web:1")
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, LeaderSince: time.Now().Add(-time.Hour)}
	st, err := l.Snapshot(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	plan := scheduler.Plan(st, time.Now())
	if len(plan.CreateTasks) != 3 {
		t.Fatalf("plan makes %d tasks, want 3", len(plan.CreateTasks))
	}
	if _, err := s.Delete(context.Background(), legion.KindService, "default", "web", store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	res := l.apply(context.Background(), &st, &plan)
	if res.Conflicts < 3 || res.Errors != 0 {
		t.Fatalf("writes of a stale plan: %+v, want its 3 creations refused", res)
	}
	if n := len(tasks(t, s)); n != 0 {
		t.Fatalf("%d tasks made for a deleted service", n)
	}
}

// A 5,000-replica Service whose constraint no node meets, deleted while
// the loop makes its tasks: no task is made after the delete, and its
// tasks are gone within deletedBound.
func TestDeletedServiceStopsMakingTasks(t *testing.T) {
	t.Parallel()
	const deletedBound = 30 * time.Second
	s := openStore(t)
	addNode(t, s, "n1")
	put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: huge}
spec:
  replicas: 5000
  placement: {constraints: ["node.labels.zone == nowhere"]}
  pod: {containers: [{name: c, image: localhost/c:1}]}
`)
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, LeaderSince: time.Now().Add(-time.Hour)}
	runUntil(t, l.Run)
	poll(t, "the first tasks", func() bool { return len(tasks(t, s)) >= scheduler.MaxCreatesPerPass })
	gone, err := s.Delete(context.Background(), legion.KindService, "default", "huge", store.Precondition{})
	if err != nil {
		t.Fatal(err)
	}
	at := gone.GetMetadata().Version
	deleted := time.Now()
	w, err := s.Watch(at)
	if err != nil {
		t.Fatal(err)
	}
	objs, listed, err := s.List(legion.KindTask, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	made := len(objs)
	left := map[string]bool{}
	for _, o := range objs {
		left[legion.ObjectKey(o)] = true
	}
	// Follow every event after the delete until no task is left and every
	// write so far has been seen.
	late := 0
	ctx, cancel := context.WithTimeout(context.Background(), deletedBound)
	defer cancel()
	var last uint64
	for len(left) > 0 || last < s.AppliedIndex() {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("after %s, %d tasks left: %v", time.Since(deleted).Round(time.Millisecond), len(left), err)
		}
		last = ev.Version
		task, ok := ev.Object.(*legion.Task)
		if !ok {
			continue
		}
		if ev.Type == store.Added {
			late++
			t.Errorf("task %s made at %d, after the delete at %d", task.Metadata.Name, ev.Version, at)
		}
		if ev.Version > listed {
			if ev.Type == store.Deleted {
				delete(left, legion.ObjectKey(task))
			} else {
				left[legion.ObjectKey(task)] = true
			}
		}
	}
	t.Logf("%d tasks at the delete (index %d), all gone %s later, %d made after it", made, at, time.Since(deleted).Round(time.Millisecond), late)
}

// BenchmarkOriginals is how a pass finds what its updates replace, to
// leave out those that change nothing: 40,000 tasks and 200 services, of
// which 60 tasks and 20 services updated. "look-up" is originalsOf;
// "whole-map" is what a pass did before, a map of the whole snapshot.
//
//	go test -run '^$' -bench Originals ./cluster/controller
func BenchmarkOriginals(b *testing.B) {
	var st scheduler.State
	var updates []legion.Object
	for i := range 40000 {
		task := orderTask("default", fmt.Sprintf("web-%d-%d", i%200, i), 0)
		st.Tasks = append(st.Tasks, task)
		if i%667 == 0 {
			updates = append(updates, task)
		}
	}
	for i := range 200 {
		svc := &legion.Service{Header: legion.Header{Kind: legion.KindService, Metadata: legion.Metadata{Namespace: "default", Name: fmt.Sprintf("web-%d", i)}}}
		st.Services = append(st.Services, svc)
		if i%10 == 0 {
			updates = append(updates, svc)
		}
	}
	b.Run("look-up", func(b *testing.B) {
		for b.Loop() {
			orig := originalsOf(&st, updates)
			if orig[keyOf(updates[0])] != updates[0] {
				b.Fatal("an update's original not found")
			}
		}
	})
	b.Run("whole-map", func(b *testing.B) {
		for b.Loop() {
			m := make(map[string]legion.Object, len(st.Tasks)+len(st.Services))
			for _, x := range st.Tasks {
				m[legion.Key(x.GetKind(), x.Metadata.Namespace, x.Metadata.Name)] = x
			}
			for _, x := range st.Services {
				m[legion.Key(x.GetKind(), x.Metadata.Namespace, x.Metadata.Name)] = x
			}
			u := updates[0]
			if m[legion.Key(u.GetKind(), u.GetMetadata().Namespace, u.GetMetadata().Name)] != u {
				b.Fatal("an update's original not found")
			}
		}
	})
}

// compareKeys orders (namespace, name) pairs as their keys namespace/name
// sort, which originalsOf's search of the snapshot's tasks relies on:
// namespaces that begin others and names that sort around '/' included.
func TestCompareKeysOrdersAsTheKeysSort(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 21))
	word := func(alphabet string) string {
		b := make([]byte, rnd.IntN(4))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	const nsChars, nameChars = "a-z0", "a-z0./_"
	for range 20000 {
		ns1, ns2 := "a"+word(nsChars), "a"+word(nsChars)
		n1, n2 := word(nameChars), word(nameChars)
		want := strings.Compare(ns1+"/"+n1, ns2+"/"+n2)
		if got := compareKeys(ns1, n1, ns2, n2); got != want {
			t.Fatalf("compareKeys(%q, %q, %q, %q) = %d, want %d as %q against %q", ns1, n1, ns2, n2, got, want, ns1+"/"+n1, ns2+"/"+n2)
		}
	}
}
