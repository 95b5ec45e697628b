package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/cluster/store/storetest"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// The cache indexes the Volumes again only when a Volume changed: other
// writes keep the index, so nodes' streams do not each scan the Volumes.
func TestVolumeIndexIsMadeAgainOnlyAfterAVolumeChanged(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	_, c, ctx := cacheOver(t, st)
	write := func(o legion.Object) *volumeIndex {
		t.Helper()
		if _, _, err := st.Put(ctx, o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.sync(ctx); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.vols
	}
	vol := func(name string) *legion.Volume {
		return &legion.Volume{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindVolume,
			Metadata: legion.Metadata{Namespace: "shop", Name: name}}, Spec: legion.VolumeSpec{Driver: legion.DriverZFS}}
	}
	first := write(vol("a"))
	if first == nil || first.byKey["shop/a"] == nil {
		t.Fatalf("first index: %+v", first)
	}
	tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask, Metadata: legion.Metadata{Namespace: "shop", Name: "t"}}}
	if again := write(tk); again != first {
		t.Fatalf("after a task write: index %p, want the same %p", again, first)
	}
	if third := write(vol("b")); third == first || third.byKey["shop/b"] == nil {
		t.Fatalf("after a Volume write: %+v, want a new index with shop/b", third)
	}
}

// openStore opens a one-manager store that leads (as dispatchertest's,
// which this package's own tests cannot import).
func openStore(t *testing.T) *store.Store {
	t.Helper()
	return openStoreWithHistory(t, 0)
}

// cacheOver is a Service over st with its view cache, and a context for
// the test's calls (10 s).
func cacheOver(t *testing.T, st *store.Store) (*Service, *viewCache, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s := New(Fixed(st), Options{})
	return s, s.cacheOf(st), ctx
}

// webAndItsTask are the Service shop/web of one replica, and its task
// web-1-1 running and ready on n0 at 10.200.0.5: a service to put before
// the streams start, and what then changes the parts every node follows.
func webAndItsTask() (*legion.Service, *legion.Task) {
	replicas := 1
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "shop", Name: "web"}}}
	svc.Spec.Replicas = &replicas
	now := time.Now()
	tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Namespace: "shop", Name: "web-1-1"}}}
	tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "web"}
	tk.Spec.Node, tk.Spec.DesiredState, tk.Spec.Slot = "n0", legion.TaskRunning, 1
	tk.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: "10.200.0.5", Started: &now}
	return svc, tk
}

// putSynced writes o and waits until the cache took it.
func putSynced(t *testing.T, ctx context.Context, st *store.Store, c *viewCache, o legion.Object) {
	t.Helper()
	if _, _, err := st.Put(ctx, o, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// openStoreWithHistory is openStore keeping history events for watches
// (0: the store's default).
func openStoreWithHistory(t testing.TB, history int) *store.Store {
	t.Helper()
	return storetest.Solo(t, func(c *store.Config) { c.HistorySize = history })
}

// The parts every node follows change the same way for every stream that
// sent its last message at the same generation: a change is worked out
// once for all of them, not once per node.
func TestSharedChangesAreWorkedOutOncePerGeneration(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	putSynced(t, ctx, st, c, svc)
	const nodes = 8
	streams := make([]*streamState, nodes)
	for i := range streams {
		// Every other stream takes the shared changes encoded apart.
		streams[i] = &streamState{node: fmt.Sprintf("n%d", i), sharedWire: i%2 == 1}
		if _, _, err := s.compose(st, c, streams[i], true); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	built := c.sharedBuilt
	c.mu.Unlock()
	putSynced(t, ctx, st, c, tk)
	var first *legionpb.Items
	var firstSet *legionpb.AssignmentSet
	var wire []byte
	for i, ss := range streams {
		set, _, err := s.compose(st, c, ss, false)
		if err != nil {
			t.Fatal(err)
		}
		if ss.sharedWire {
			// Encoded once, the same bytes for every stream; merged, the
			// same changes as in the fields of the streams that did not ask.
			if set == nil || len(sharedOf(set)) == 0 || set.EndpointChanges != nil || set.MemberChanges != nil {
				t.Fatalf("node %s: want the shared changes encoded apart alone, got %v", ss.node, set)
			}
			if wire == nil {
				wire = sharedOf(set)
			} else if &sharedOf(set)[0] != &wire[0] {
				t.Fatalf("node %s: the shared changes encoded again for it", ss.node)
			}
			var merged legionpb.AssignmentSet
			if err := proto.Unmarshal(wire, &merged); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(merged.EndpointChanges, firstSet.EndpointChanges) || !proto.Equal(merged.MemberChanges, firstSet.MemberChanges) ||
				merged.TaskChanges != nil || merged.ValueChanges != nil {
				t.Fatalf("node %s: the shared changes decode to %v, want those sent to n0 in their fields", ss.node, &merged)
			}
			// As the node decodes the message: the changes are its own
			// fields, sent to n0 in them.
			got := received(t, set)
			if !proto.Equal(got.EndpointChanges, firstSet.EndpointChanges) || !proto.Equal(got.MemberChanges, firstSet.MemberChanges) || len(got.GetShared()) > 0 {
				t.Fatalf("node %s: the message decodes to %v, want the changes sent to n0 in their fields", ss.node, got)
			}
			continue
		}
		if set == nil || set.EndpointChanges == nil || set.MemberChanges == nil {
			t.Fatalf("node %s: no endpoint and member changes for a task become ready: %v", ss.node, set)
		}
		if i == 0 {
			first, firstSet = set.EndpointChanges, set
		} else if set.EndpointChanges != first {
			t.Fatalf("node %s: its own endpoint changes, not the ones worked out for n0", ss.node)
		}
	}
	c.mu.Lock()
	got := c.sharedBuilt - built
	c.mu.Unlock()
	if got != 1 {
		t.Fatalf("the shared changes were worked out %d times for %d streams at one generation: want once", got, nodes)
	}
}
