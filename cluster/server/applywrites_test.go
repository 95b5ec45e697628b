package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// soloCluster starts a cluster of one manager, stopped at the test's end,
// and returns its admin client and its store.
func soloCluster(t *testing.T) (*client.Client, *store.Store) {
	t.Helper()
	m := newManager(t)
	t.Cleanup(m.stop)
	return initCluster(t, m), m.s.Store()
}

// An apply's writes are proposed together: on a busy cluster each write
// waits behind the others in the log, and an apply that waited once per
// object took as many waits as it had objects. They share the log's
// appends, apply in the request's kind order, and are answered each as
// before.
func TestApplyProposesItsWritesTogether(t *testing.T) {
	t.Parallel()
	c, st := soloCluster(t)
	ctx := context.Background()

	const count = 64
	objs := []legion.Object{configObj("", "kept", "x")}
	if _, err := c.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range count {
		objs = append(objs, configObj("", fmt.Sprint("c", i), "x"))
	}
	appends, entries := st.LogAppends()
	res, err := c.Apply(ctx, objs, client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, e := st.LogAppends()
	if e-entries < count {
		t.Fatalf("%d entries appended for %d objects", e-entries, count)
	}
	t.Logf("%d appends for %d entries", a-appends, e-entries)
	if got := a - appends; got > count/4 {
		t.Fatalf("%d log appends for an apply of %d objects, want them to share appends", got, count)
	}
	if res[0].Outcome != client.Unchanged {
		t.Fatalf("the object applied before: %s, want unchanged", res[0].Outcome)
	}
	last := uint64(0)
	for i, r := range res[1:] {
		v := r.Object.GetMetadata().Version
		if r.Outcome != client.Created || v <= last {
			t.Fatalf("object %d: %s at version %d (after %d), want created, in order", i, r.Outcome, v, last)
		}
		last = v
	}
}

// What stops an apply still stops it before the objects after it: a run
// of writes ends at an object whose version the caller named, and that
// one's refusal leaves the later ones unwritten, the message saying how
// many were applied.
func TestApplyStopsAtANamedVersion(t *testing.T) {
	t.Parallel()
	_, st := soloCluster(t)
	ctx := context.Background()

	stale := uint64(1)
	items := []applyItem{
		{obj: configObj("default", "first", "x")},
		{obj: configObj("default", "second", "x")},
		{obj: configObj("default", "named", "x"), expected: &stale},
		{obj: configObj("default", "after", "x")},
	}
	for i := range items {
		items[i].index = i
	}
	_, err := applyItems(ctx, st, items, applyMode{}, &sync.Mutex{})
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "Config default/named") ||
		!strings.Contains(err.Error(), "(2 of 4 objects applied before it)") {
		t.Fatalf("apply with a stale named version: %v, want ABORTED naming it and counting 2 applied before it", err)
	}
	for name, want := range map[string]bool{"first": true, "second": true, "named": false, "after": false} {
		_, _, err := st.Get(legion.KindConfig, "default", name)
		if got := err == nil; got != want {
			t.Errorf("%s stored: %v, want %v", name, got, want)
		}
	}
}

// A write that lost a race (what admission read was overwritten before
// the write) is made again on its own on top of the newer object, as
// applyOne does, while the rest of its run is written together.
func TestApplyWritesAgainWhatLostARace(t *testing.T) {
	t.Parallel()
	_, st := soloCluster(t)
	ctx := context.Background()

	read, _, err := st.Put(ctx, configObj("default", "raced", "a"), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, configObj("default", "raced", "b"), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	items := []applyItem{
		{obj: configObj("default", "raced", "c"), index: 0},
		{obj: configObj("default", "fresh", "x"), index: 1},
	}
	adm := &admission{current: map[string]legion.Object{legion.ObjectKey(items[0].obj): read}}
	res, err := writeItems(ctx, st, items, adm, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != Updated || res[1].Outcome != Created {
		t.Fatalf("outcomes %s, %s, want updated, created", res[0].Outcome, res[1].Outcome)
	}
	o, _, err := st.Get(legion.KindConfig, "default", "raced")
	if err != nil || o.(*legion.Config).Spec.Text != "c" {
		t.Fatalf("the raced object: %v %q, want the apply's content on top", err, o.(*legion.Config).Spec.Text)
	}
	if o.GetMetadata().Version != res[0].GetObject().GetMetadata().GetVersion() {
		t.Fatalf("answered version %d, stored %d", res[0].GetObject().GetMetadata().GetVersion(), o.GetMetadata().Version)
	}
}
