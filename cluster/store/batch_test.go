package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
)

// WriteAll applies each write as its own entry with its own preconditions,
// and a write whose required object is gone, or was made again, is
// refused as a conflict while the others apply.
func TestWriteAllRequirements(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	owner, _, err := n.s.Put(ctx, config("default", "owner", "x"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := Requirement{Kind: legion.KindConfig, Namespace: "default", Name: "owner", UID: owner.GetMetadata().UID}
	var writes []Write
	for i := range 600 { // more than one window
		writes = append(writes, Write{Object: config("default", fmt.Sprint("c", i), "x"),
			Options: WriteOptions{Precondition: Precondition{MustNotExist: true}}, Requires: []Requirement{req}})
	}
	errs := n.s.WriteAll(ctx, writes)
	seen := map[uint64]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		o, _, err := n.s.Get(legion.KindConfig, "default", fmt.Sprint("c", i))
		if err != nil {
			t.Fatalf("c%d: %v", i, err)
		}
		if v := o.GetMetadata().Version; seen[v] {
			t.Fatalf("c%d shares version %d with another write", i, v)
		} else {
			seen[v] = true
		}
	}

	// Made again under the same name: the old uid no longer meets it.
	if _, err := n.s.Delete(ctx, legion.KindConfig, "default", "owner", Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "owner", "y"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := n.s.AppliedIndex()
	errs = n.s.WriteAll(ctx, []Write{
		{Object: config("default", "late", "x"), Requires: []Requirement{req}},
		{Object: config("default", "c1", "x"), Delete: true},
		{Object: config("default", "free", "x"), Requires: []Requirement{{Kind: legion.KindConfig, Namespace: "default", Name: "owner"}}},
		{Object: config("default", "orphan", "x"), Requires: []Requirement{{Kind: legion.KindConfig, Namespace: "default", Name: "nobody"}}},
	})
	if !errors.Is(errs[0], ErrConflict) || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrConflict) {
		t.Fatalf("errors %v, want a conflict, nil, nil, a conflict", errs)
	}
	for _, name := range []string{"late", "orphan", "c1"} {
		if _, _, err := n.s.Get(legion.KindConfig, "default", name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %v, want it absent", name, err)
		}
	}
	if got := n.s.AppliedIndex() - before; got != 4 {
		t.Fatalf("%d entries applied, want 4 (one per write)", got)
	}
}

// Writes that arrive while the leader syncs the log go to disk together
// afterwards: one append and one fdatasync for all of them, counted by
// the log. Without raft's batching (a buffered apply queue, appends of up
// to MaxAppendEntries) each would cost a sync of its own.
func TestWritesWaitingForASyncShareTheNext(t *testing.T) {
	t.Parallel()
	n := single(t)
	w := n.s.logs.wal
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.change.Lock()
	w.sync = func(f *os.File) error {
		once.Do(func() { close(entered); <-release })
		return datasync(f)
	}
	w.change.Unlock()

	const waiting = 63
	first := n.s.raft.Apply(mustEncode(t, "first"), 10*time.Second)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first write never reached the log's sync")
	}
	// The leader is inside the first append's sync; these queue behind it
	// (Apply returns once raft has taken the entry into its queue).
	appends, appended := w.appends.Load(), w.appended.Load()
	// An apply queue too short to hold them makes Apply wait for room:
	// the timeout turns that into a failure rather than a hang.
	futures := make([]raft.ApplyFuture, waiting)
	for i := range futures {
		futures[i] = n.s.raft.Apply(mustEncode(t, fmt.Sprint("w", i)), 2*time.Second)
	}
	close(release)
	for i, f := range append(futures, first) {
		if err := f.Error(); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if r := f.Response().(*result); r.err != nil {
			t.Fatalf("write %d: %v", i, r.err)
		}
	}
	if got := w.appended.Load() - appended; got != waiting+1 {
		t.Fatalf("%d entries appended after the first sync began, want %d", got, waiting+1)
	}
	// The first append ends (counted once its sync returns), then one for
	// all the writes that waited.
	if got := w.appends.Load() - appends; got != 2 {
		t.Fatalf("%d appends (fdatasyncs) for one write and %d waiting behind it, want 2", got, waiting)
	}
}

func mustEncode(t *testing.T, name string) []byte {
	t.Helper()
	data, err := encodeWrite(&Write{Object: config("default", name, "x")})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// PutAllInPlace proposes its writes together: they share the log's
// appends (written one after another's commit, each would cost an append
// and an fdatasync of its own), apply in order, each at its own version,
// and make each object the one stored, as PutInPlace does. A write whose
// precondition fails fails alone.
func TestPutAllInPlaceSharesAppends(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	stale, _, err := n.s.Put(ctx, config("default", "stale", "x"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "stale", "y"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	const count = 64
	var puts []Put
	for i := range count {
		puts = append(puts, Put{Object: config("default", fmt.Sprint("c", i), "x"),
			Options: WriteOptions{Precondition: Precondition{MustNotExist: true}}})
	}
	bad := count / 2
	puts[bad] = Put{Object: config("default", "stale", "z"),
		Options: WriteOptions{Precondition: Precondition{Version: stale.GetMetadata().Version}}}
	appends, entries := n.s.LogAppends()
	prevs, errs, err := n.s.PutAllInPlace(ctx, puts)
	if err != nil {
		t.Fatal(err)
	}
	a, e := n.s.LogAppends()
	if got := e - entries; got != count {
		t.Fatalf("%d entries appended, want %d (one per write)", got, count)
	}
	if got := a - appends; got > count/4 {
		t.Fatalf("%d appends for %d writes proposed together, want them to share appends", got, count)
	}
	last := uint64(0)
	for i, p := range puts {
		m := p.Object.GetMetadata()
		if i == bad {
			if !errors.Is(errs[i], ErrConflict) || prevs[i] == nil {
				t.Fatalf("write at a stale version: %v (prev %v), want a conflict with the stored object", errs[i], prevs[i])
			}
			if m.Version != 0 {
				t.Fatalf("a refused write changed its object: version %d", m.Version)
			}
			continue
		}
		if errs[i] != nil || prevs[i] != nil {
			t.Fatalf("write %d: %v (prev %v)", i, errs[i], prevs[i])
		}
		stored, _, err := n.s.Get(legion.KindConfig, "default", m.Name)
		if err != nil {
			t.Fatal(err)
		}
		sm := stored.GetMetadata()
		if m.Version != sm.Version || m.UID != sm.UID || m.Generation != 1 || m.Version <= last {
			t.Fatalf("%s in place: version %d uid %s generation %d (after %d), stored: version %d uid %s",
				m.Name, m.Version, m.UID, m.Generation, last, sm.Version, sm.UID)
		}
		last = m.Version
	}
	if o, _, err := n.s.Get(legion.KindConfig, "default", "stale"); err != nil || string(o.(*legion.Config).Spec.Data) != "y" {
		t.Fatalf("the stale write changed the stored object: %v", err)
	}

	// An object that cannot be an entry refuses the whole call before any
	// of it is proposed.
	huge := config("default", "huge", strings.Repeat("x", MaxEntry))
	before := n.s.AppliedIndex()
	_, _, err = n.s.PutAllInPlace(ctx, []Put{{Object: config("default", "first", "x")}, {Object: huge}})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a put of an object over the entry limit: %v, want ErrTooLarge", err)
	}
	if n.s.AppliedIndex() != before {
		t.Fatal("a refused call proposed some of its writes")
	}
}
