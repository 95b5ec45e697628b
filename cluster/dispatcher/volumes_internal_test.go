package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testpoll"
)

// The shared index is read again only when a Volume changed: other
// writes reuse it, so nodes' streams do not each scan the Volumes.
func TestVolumeIndexIsReadAgainOnlyAfterAVolumeChanged(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(Fixed(st), Options{})
	write := func(o legion.Object) uint64 {
		t.Helper()
		got, _, err := st.Put(context.Background(), o, store.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The store publishes an object before its event: wait until the
		// history has it, as a stream woken by it would.
		testpoll.Until(t, "the write's event", 10*time.Second, 10*time.Millisecond, func() bool {
			w, err := st.Watch(got.GetMetadata().Version - 1)
			if err != nil {
				return false
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = w.Next(ctx)
			return err == nil
		})
		return got.GetMetadata().Version
	}
	vol := func(name string) *legion.Volume {
		return &legion.Volume{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindVolume,
			Metadata: legion.Metadata{Namespace: "shop", Name: name}}, Spec: legion.VolumeSpec{Driver: legion.DriverZFS}}
	}
	at := write(vol("a"))
	first, err := s.volumeIndexAt(st, at)
	if err != nil || first.byKey["shop/a"] == nil {
		t.Fatalf("first index: %+v, %v", first, err)
	}
	tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask, Metadata: legion.Metadata{Namespace: "shop", Name: "t"}}}
	at = write(tk)
	if again, err := s.volumeIndexAt(st, at); err != nil || again != first {
		t.Fatalf("after a task write: index %p (err %v), want the shared %p", again, err, first)
	}
	if s.volsAt != at {
		t.Errorf("the shared index is known to hold at %d, want %d: the next check would start further back", s.volsAt, at)
	}
	at = write(vol("b"))
	third, err := s.volumeIndexAt(st, at)
	if err != nil || third == first || third.byKey["shop/b"] == nil {
		t.Fatalf("after a Volume write: %+v (err %v), want a new reading with shop/b", third, err)
	}
	// A version the history does not show yet means reading again.
	if !volumesChanged(st, at, at+100) {
		t.Error("a version beyond the history counted as unchanged")
	}
}

// openStore opens a one-manager store that leads (as dispatchertest's,
// which this package's own tests cannot import).
func openStore(t *testing.T) *store.Store {
	t.Helper()
	_, tr := raft.NewInmemTransport("m1")
	st, err := store.Open(store.Config{Dir: t.TempDir(), ID: "m1", Transport: tr, WriteTimeout: 5 * time.Second, Timing: store.FastTiming()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, "leadership", 10*time.Second, 10*time.Millisecond, st.IsLeader)
	return st
}
