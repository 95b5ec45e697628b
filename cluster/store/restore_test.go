package store

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
)

// A dump loaded into a new store of another directory makes a cluster of
// one that leads at once, holds every object with its version, and
// writes above the dump's version.
func TestDumpLoadedLeadsAloneAboveTheDumpsVersion(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	n := openNodeKey(t, "m1", t.TempDir(), FastTiming(), key)
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	putConfigs(t, n, 5)
	before, _, err := n.s.Get(legion.KindConfig, "default", "c3")
	if err != nil {
		t.Fatal(err)
	}
	var objs []json.RawMessage
	version, servers, err := n.s.Dump(context.Background(), func(raw []byte) error {
		objs = append(objs, bytes.Clone(raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 5 || len(servers) != 1 || string(servers[0].ID) != "m1" || version < before.GetMetadata().Version {
		t.Fatalf("dump: %d objects, servers %v, version %d", len(objs), servers, version)
	}
	// Written after the dump: not in the restored cluster.
	if _, _, err := n.s.Put(context.Background(), config("default", "after", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.s.Close()

	dir := t.TempDir()
	loaded := time.Now()
	if err := Load(dir, key, "m1", "m1", objs, version, nil); err != nil {
		t.Fatal(err)
	}
	if err := Load(dir, key, "m1", "m1", objs, version, nil); err == nil {
		t.Fatal("a second load into a directory with a store succeeded")
	}
	r := openNodeKey(t, "m1", dir, FastTiming(), key)
	defer r.s.Close()
	waitFor(t, "the restored manager to lead alone", 10*time.Second, r.s.IsLeader)
	got, _, err := r.s.Get(legion.KindConfig, "default", "c3")
	if err != nil || got.GetMetadata().Version != before.GetMetadata().Version || got.GetMetadata().UID != before.GetMetadata().UID {
		t.Fatalf("c3 after restore: %+v %v, want version %d uid %s", got, err, before.GetMetadata().Version, before.GetMetadata().UID)
	}
	if _, _, err := r.s.Get(legion.KindConfig, "default", "after"); err == nil {
		t.Fatal("an object written after the dump is in the restored store")
	}
	o, _, err := r.s.Put(context.Background(), config("default", "new", "y"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.GetMetadata().Version <= version {
		t.Fatalf("a write after the restore got version %d, not above the dump's %d", o.GetMetadata().Version, version)
	}
	assertFreshTerm(t, r, loaded, o.GetMetadata().Version)
}

// assertFreshTerm checks that the entry at version of a loaded or
// recovered store is of a term no cluster before it reached: at least the
// clock's seconds when it was made (see freshTerm).
func assertFreshTerm(t *testing.T, n *node, made time.Time, version uint64) {
	t.Helper()
	var l raft.Log
	if err := n.s.logs.GetLog(version, &l); err != nil {
		t.Fatal(err)
	}
	if l.Term < uint64(made.Unix()) {
		t.Fatalf("the entry at %d after the restore is of term %d: the cluster before may have written one of that term at that index", version, l.Term)
	}
}

// A survivor of three managers that lost the other two for good is made a
// cluster of one: it leads alone with everything it had, and writes.
func TestRecoverMakesASurvivorLeadAlone(t *testing.T) {
	t.Parallel()
	keys := [][]byte{newKey(t), newKey(t), newKey(t)}
	ns := threeNodesKeys(t, FastTiming(), keys)
	putConfigs(t, ns[0], 4)
	waitFor(t, "m3 to apply", 10*time.Second, func() bool {
		_, _, err := ns[2].s.Get(legion.KindConfig, "default", "c3")
		return err == nil
	})
	for _, n := range ns {
		n.s.Close()
	}
	recovered := time.Now()
	version, err := Recover(ns[2].dir, keys[2], "m3", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := openNodeKey(t, "m3", ns[2].dir, FastTiming(), keys[2])
	defer r.s.Close()
	waitFor(t, "the survivor to lead alone", 10*time.Second, r.s.IsLeader)
	if _, _, err := r.s.Get(legion.KindConfig, "default", "c3"); err != nil {
		t.Fatal(err)
	}
	o, _, err := r.s.Put(context.Background(), config("default", "new", "y"), WriteOptions{})
	if err != nil || o.GetMetadata().Version <= version {
		t.Fatalf("write after recovery: %v, version %v (recovered at %d)", err, o, version)
	}
	assertFreshTerm(t, r, recovered, o.GetMetadata().Version)
	cf := r.s.Raft().GetConfiguration()
	if err := cf.Error(); err != nil || len(cf.Configuration().Servers) != 1 {
		t.Fatalf("membership after recovery: %+v %v", cf.Configuration(), err)
	}
}
