package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/logtest"
	"github.com/legionbsd/legion/internal/testpoll"
)

// A cache whose watch fell behind the store's history reads the replica
// again, and the streams go on with the changes that reading found (a
// task gone, a task moved away, an address changed) rather than each
// starting over with a whole set.
func TestCacheReadingAgainSendsChangesNotWholeSets(t *testing.T) {
	t.Parallel()
	st := openStoreWithHistory(t, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := func(o legion.Object) {
		t.Helper()
		if _, _, err := st.Put(ctx, o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "shop", Name: "web"}}}
	svc.Status.VIP = "10.201.0.5"
	svc.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 8080}}}
	now := time.Now()
	task := func(name, node, ip string) *legion.Task {
		tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
		tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "web"}
		tk.Spec.Node, tk.Spec.DesiredState = node, legion.TaskRunning
		tk.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: ip, Started: &now}
		return tk
	}
	put(svc)
	for _, n := range []string{"stays", "goes", "moves"} {
		put(task("web-"+n, "n1", "10.200.0.10"))
	}
	var logged logtest.Buffer
	s := New(Fixed(st), Options{Logger: logged.Logger()})
	c := s.cacheOf(st)
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	ss := &streamState{node: "n1", shape: shape{apart: true}}
	if set, _, err := s.compose(st, c, ss, true); err != nil || set == nil || set.GetDelta() {
		t.Fatalf("first set: %v, %v", set, err)
	}
	c.mu.Lock()
	loads := c.loads
	c.mu.Unlock()

	// While the cache cannot take events, more happen than the history
	// holds: it has to read the replica again.
	c.mu.Lock()
	if _, err := st.Delete(ctx, legion.KindTask, "shop", "web-goes", store.Precondition{}); err != nil {
		c.mu.Unlock()
		t.Fatal(err)
	}
	put(task("web-moves", "n2", "10.200.1.10"))
	put(task("web-stays", "n1", "10.200.0.11"))
	for i := range 40 {
		put(&legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
			Metadata: legion.Metadata{Namespace: "shop", Name: fmt.Sprintf("filler-%d", i)}}})
	}
	c.mu.Unlock()
	testpoll.Until(t, "the cache to read the replica again", 10*time.Second, 10*time.Millisecond, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.loads > loads
	})
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The manager's log says so: every stream's next message carries what
	// the reading found, a burst an operator of a busy manager should see.
	testpoll.Until(t, "the reading to be logged", 10*time.Second, 10*time.Millisecond, func() bool {
		return logged.Count(readAgainBehind) == 1
	})
	if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "from=") || !strings.Contains(out, "took=") {
		t.Errorf("the reading's log line lacks its level or its figures:\n%s", out)
	}
	set, _, err := s.compose(st, c, ss, false)
	if err != nil || set == nil {
		t.Fatalf("after the reading: %v, %v", set, err)
	}
	if !set.GetDelta() {
		t.Fatal("after the cache read the replica again the stream was sent a whole set")
	}
	key := func(name string) string { return itemKey("shop", name) }
	if r := set.GetTaskChanges().GetRemoved(); !slices.Contains(r, key("web-goes")) || !slices.Contains(r, key("web-moves")) {
		t.Errorf("tasks removed from n1: %q; want web-goes and web-moves", r)
	}
	if _, ok := set.GetTaskChanges().PutMap()[key("web-stays")]; !ok {
		t.Errorf("the changed task web-stays was not sent: %v", set.GetTaskChanges())
	}
	eps := set.GetEndpointTaskChanges()
	if !slices.Contains(eps.GetRemoved(), epTaskKey(key("web"), "web-goes")) {
		t.Errorf("endpoint of web-goes not removed: %v", eps)
	}
	for _, n := range []string{"web-stays", "web-moves"} {
		if _, ok := eps.PutMap()[epTaskKey(key("web"), n)]; !ok {
			t.Errorf("endpoint of %s not sent again: %v", n, eps)
		}
	}
	if r := set.GetMemberChanges().GetRemoved(); !slices.Contains(r, key("web-goes")) {
		t.Errorf("member web-goes not removed: %q", r)
	}
}
