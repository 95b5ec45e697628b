package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/jsonfast"
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
	stale := outdated(t, n)
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

// storedUID reads the uid of any stored object as decoding it does: of
// every kind, with metadata anywhere among the fields, escapes in the
// uid, no uid at all; and says so of JSON that is no object.
func TestStoredUIDReadsWhatDecodingReads(t *testing.T) {
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "shop", Name: "web", UID: "9c1d2f3e-0000-4000-8000-000000000001",
			Labels: map[string]string{"uid": "not-this", "metadata": "nor-this"}}}}
	svc.Spec.Pod.Containers = []legion.Container{{Name: "web", Image: "registry.example/shop/web:1.4",
		Env: []legion.EnvVar{{Name: "uid", Value: `{"metadata":{"uid":"x"}}`}}}}
	stored, err := legion.MarshalJSON(svc)
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{
		"a stored Service":           string(stored),
		"metadata last":              `{"spec":{"metadata":{"uid":"wrong"}},"kind":"Config","metadata":{"name":"a","labels":{"uid":"no"},"uid":"u-1"}}`,
		"an escaped uid":             `{"metadata":{"uid":"u\u002d2"}}`,
		"no uid":                     `{"metadata":{"name":"a"},"spec":{}}`,
		"no metadata":                `{"kind":"Config"}`,
		"metadata with values after": `{"metadata":{"name":"a","uid":"u-3","version":7},"status":{"uid":"x"}}`,
	} {
		var want struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, err := storedUID([]byte(raw)); err != nil || got != want.Metadata.UID {
			t.Errorf("%s: uid %q, %v; decoding gives %q", name, got, err, want.Metadata.UID)
		}
	}
	for _, raw := range []string{`[]`, `{"metadata":[1]}`, `{"metadata":{"uid":7}}`, `{"metadata":{"uid":`, ``} {
		if got, err := storedUID([]byte(raw)); err == nil {
			t.Errorf("%q: uid %q and no error", raw, got)
		}
	}
}

// BenchmarkStoredUID reads a Service's uid as checking a task's owner
// does, against decoding the Service for it (what the check did before).
func BenchmarkStoredUID(b *testing.B) {
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "shop", Name: "web", UID: "9c1d2f3e-0000-4000-8000-000000000001",
			Labels: map[string]string{"app": "web", "tier": "front"}}}}
	for i := range 2 {
		c := legion.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.example/shop/web:1.4",
			Command: []string{"/app/web", "--listen", ":8080"}, Ports: []legion.ContainerPort{{Name: "http", ContainerPort: 8080}}}
		for j := range 8 {
			c.Env = append(c.Env, legion.EnvVar{Name: fmt.Sprintf("VAR_%d", j), Value: strings.Repeat("v", 24)})
		}
		svc.Spec.Pod.Containers = append(svc.Spec.Pod.Containers, c)
	}
	raw, err := legion.MarshalJSON(svc)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if uid, err := storedUID(raw); err != nil || uid != svc.Metadata.UID {
				b.Fatal(uid, err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var m struct {
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			}
			if err := jsonfast.Unmarshal(raw, &m); err != nil || m.Metadata.UID != svc.Metadata.UID {
				b.Fatal(m, err)
			}
		}
	})
}

// A bulk write of several windows (the next proposed while the last one
// commits) applies in order, each write answered as its own: versions
// rise with the writes' order across the windows, and a write refused in
// any window is refused alone.
func TestPutAllInPlaceAcrossWindows(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	stale := outdated(t, n)
	const count = 2*writeAllWindow + 100
	bad := map[int]bool{7: true, writeAllWindow + 3: true, 2*writeAllWindow + 50: true}
	puts := make([]Put, count)
	for i := range puts {
		puts[i] = Put{Object: config("default", fmt.Sprint("c", i), "x"),
			Options: WriteOptions{Precondition: Precondition{MustNotExist: true}}}
		if bad[i] {
			puts[i] = Put{Object: config("default", "stale", fmt.Sprint("z", i)),
				Options: WriteOptions{Precondition: Precondition{Version: stale.GetMetadata().Version}}}
		}
	}
	_, errs, err := n.s.PutAllInPlace(ctx, puts)
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	for i, p := range puts {
		if bad[i] {
			if !errors.Is(errs[i], ErrConflict) {
				t.Fatalf("write %d at a stale version: %v, want a conflict", i, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		v := p.Object.GetMetadata().Version
		if v <= last {
			t.Fatalf("write %d at version %d, after %d: not in the writes' order", i, v, last)
		}
		last = v
	}
}

// outdated writes Config default/stale twice and returns it as it was
// first written: a write with its version as precondition is refused.
func outdated(t *testing.T, n *node) legion.Object {
	t.Helper()
	ctx := context.Background()
	first, _, err := n.s.Put(ctx, config("default", "stale", "x"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "stale", "y"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return first
}
