// Package storetest gives tests a real store to write to: one member,
// on a temporary directory, over raft's in-memory transport, leading.
package storetest

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testpoll"
)

// Solo opens a one-member store that leads, closed when the test ends.
// with, when not nil, changes its configuration before it opens.
func Solo(t testing.TB, with func(*store.Config)) *store.Store {
	t.Helper()
	st, lead := Unelected(t, with)
	lead()
	return st
}

// Unelected opens the one-member store Solo does, with nothing applied
// yet, and lead bootstraps it and waits for its leadership: for what
// reads a store before its first entry.
func Unelected(t testing.TB, with func(*store.Config)) (st *store.Store, lead func()) {
	t.Helper()
	_, tr := raft.NewInmemTransport("m1")
	cfg := store.Config{Dir: t.TempDir(), ID: "m1", Transport: tr, WriteTimeout: 5 * time.Second, Timing: store.FastTiming()}
	if with != nil {
		with(&cfg)
	}
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); tr.Close() })
	return st, func() {
		t.Helper()
		if err := st.Bootstrap("m1"); err != nil {
			t.Fatal(err)
		}
		testpoll.Until(t, "the store's leadership", 10*time.Second, 5*time.Millisecond, st.IsLeader)
	}
}
