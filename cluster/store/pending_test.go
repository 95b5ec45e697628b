package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	bolt "go.etcd.io/bbolt"
)

// crash stops a store leaving its file as kill -9 would: raft and the
// flusher stop and nothing more is written to the file.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.fsm.hold.Store(true)
	s.hist.close()
	close(s.stop)
	s.bg.Wait()
	if err := s.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// listed is what a List shows of each object: enough to tell a stale or
// re-created object from the right one.
type listed struct {
	Name, Data, UID     string
	Version, Generation uint64
}

func listConfigs(t *testing.T, s *Store) ([]listed, uint64) {
	t.Helper()
	objs, at, err := s.List(legion.KindConfig, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []listed
	for _, o := range objs {
		m := o.GetMetadata()
		out = append(out, listed{Name: m.Name, Data: string(o.(*legion.Config).Spec.Data), UID: m.UID,
			Version: m.Version, Generation: m.Generation})
	}
	return out, at
}

func names(ls []listed) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// Changes applied but not yet in the file are read over it (new keys in
// key order among the file's, deletions hiding them, updates replacing
// them); after a crash the file serves its own state at once, and raft
// applies again from its log exactly what the file lacked.
func TestCrashBeforeTheFileCaughtUpReappliesFromTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := leaderIn(t, dir)
	putConfigs(t, n, 5)
	ctx := context.Background()
	if err := n.s.fsm.flush(); err != nil {
		t.Fatal(err)
	}
	inFile, inFileAt := listConfigs(t, n.s)

	n.s.fsm.hold.Store(true)
	for _, o := range []*legion.Config{config("default", "c0a", "new"), config("default", "c3", "changed"), config("default", "d", "new")} {
		if _, _, err := n.s.Put(ctx, o, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.s.Delete(ctx, legion.KindConfig, "default", "c2", Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Get(legion.KindConfig, "default", "c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a deleted object not yet out of the file: %v, want ErrNotFound", err)
	}
	if o, _, err := n.s.Get(legion.KindConfig, "default", "c3"); err != nil || string(o.(*legion.Config).Spec.Data) != "changed" {
		t.Fatalf("get of an update not yet in the file: %v %v", o, err)
	}
	before, beforeAt := listConfigs(t, n.s)
	if diff := cmp.Diff([]string{"c0", "c0a", "c1", "c3", "c4", "d"}, names(before)); diff != "" {
		t.Fatalf("list over pending changes (-want +got):\n%s", diff)
	}
	if p, err := n.s.fsm.fileApplied(); err != nil || p != inFileAt {
		t.Fatalf("the file is at %d (%v), want %d: the test needs the changes unwritten", p, err, inFileAt)
	}
	crash(t, n.s)

	n2 := openNode(t, "m1", dir)
	defer n2.s.Close()
	// At once, before any election: the file's state.
	got, at := listConfigs(t, n2.s)
	if at != inFileAt {
		t.Fatalf("read after the crash at %d, want the file's %d", at, inFileAt)
	}
	if diff := cmp.Diff(inFile, got); diff != "" {
		t.Fatalf("objects after the crash, before raft applied again (-want +got):\n%s", diff)
	}
	w, err := n2.s.Watch(at)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader after the crash", 5*time.Second, n2.s.IsLeader)
	if err := n2.s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = listConfigs(t, n2.s)
	if diff := cmp.Diff(before, got); diff != "" {
		t.Fatalf("objects once the log was applied again (-want +got):\n%s", diff)
	}
	// The watch sees each lost change once, in order, at its version.
	type ev struct {
		Type EventType
		Name string
	}
	var evs []ev
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for w.Version() < beforeAt {
		e, err := w.Next(wctx)
		if err != nil {
			t.Fatalf("after %v: %v", evs, err)
		}
		evs = append(evs, ev{e.Type, e.Object.GetMetadata().Name})
	}
	want := []ev{{Added, "c0a"}, {Modified, "c3"}, {Added, "d"}, {Deleted, "c2"}}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Fatalf("events applied again (-want +got):\n%s", diff)
	}
	o, _, err := n2.s.Put(ctx, config("default", "after", "x"), WriteOptions{})
	if err != nil || o.GetMetadata().Version <= beforeAt {
		t.Fatalf("write after the crash: %v %v, want a version above %d", o, err, beforeAt)
	}
}

// Raft compacts its log up to a snapshot and never restores it into the
// persistent state machine at start, so a snapshot first writes what is
// pending to the file.
func TestSnapshotWritesPendingChangesFirst(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := n.s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n.s.fsm.hold.Store(true)
	last, _, err := n.s.Put(ctx, config("default", "last", "x"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.s.fsm.pendingDeltas() == 0 {
		t.Fatal("the last write reached the file: the test needs it pending")
	}
	n.s.fsm.hold.Store(false)
	if err := n.s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	meta, err := n.s.snaps.meta()
	if err != nil || meta == nil {
		t.Fatalf("snapshot meta: %v %v", meta, err)
	}
	p, err := n.s.fsm.fileApplied()
	if err != nil {
		t.Fatal(err)
	}
	if p < meta.Index || p < last.GetMetadata().Version {
		t.Fatalf("file at %d after a snapshot at %d of a write at %d", p, meta.Index, last.GetMetadata().Version)
	}
}

// A crash between storing an installed snapshot and restoring it leaves
// the state machine behind the snapshot; raft would start after the
// snapshot, so Open restores it.
func TestOpenRestoresASnapshotNewerThanTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := leaderIn(t, dir)
	putConfigs(t, n, 5)
	if err := n.s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want, wantAt := listConfigs(t, n.s)
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	// The state machine as it was before the snapshot arrived: empty.
	db, err := openBolt(dir + "/" + FileName)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketObjects); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketObjects); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyApplied, u64(1))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	n2 := openNode(t, "m1", dir)
	defer n2.s.Close()
	got, at := listConfigs(t, n2.s)
	if at != wantAt {
		t.Fatalf("read after open at %d, want the snapshot's %d", at, wantAt)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("objects after open (-want +got):\n%s", diff)
	}
}

// Reads while writes apply and reach the file see one consistent state:
// exactly the objects created at or below the version they were read at.
func TestReadsAreConsistentWhileChangesReachTheFile(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var created []uint64
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 25 {
				o, _, err := n.s.Put(ctx, config("default", fmt.Sprintf("w%d-%d", w, i), "x"), WriteOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				created = append(created, o.GetMetadata().Version)
				mu.Unlock()
			}
		}()
	}
	type read struct {
		at       uint64
		versions []uint64
	}
	var reads []read
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			objs, at, err := n.s.List(legion.KindConfig, "default", nil)
			if err != nil {
				t.Error(err)
				return
			}
			r := read{at: at}
			for _, o := range objs {
				r.versions = append(r.versions, o.GetMetadata().Version)
			}
			reads = append(reads, r)
		}
	}()
	writers.Wait()
	cancel()
	<-done
	if len(reads) == 0 {
		t.Fatal("no reads made")
	}
	for _, r := range reads {
		want := 0
		for _, v := range created {
			if v <= r.at {
				want++
			}
		}
		for _, v := range r.versions {
			if v > r.at {
				t.Fatalf("read at %d shows an object at %d", r.at, v)
			}
		}
		if len(r.versions) != want {
			t.Fatalf("read at %d shows %d objects, %d were created by then", r.at, len(r.versions), want)
		}
	}
}

// A list of one kind passes over the pending changes holding none of it,
// and sees every one that does: a deletion hides the file's object, and
// a kind only ever pending is listed. Count agrees.
func TestListOfOneKindOverPendingChangesOfOthers(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	putConfigs(t, n, 3)
	if _, _, err := n.s.Put(ctx, volume("default", "v0", "1"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.s.fsm.flush(); err != nil {
		t.Fatal(err)
	}
	n.s.fsm.hold.Store(true)
	// Batches of one kind each, and one of two kinds.
	if _, _, err := n.s.Put(ctx, config("default", "c9", "new"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.s.Delete(ctx, legion.KindVolume, "default", "v0", Precondition{}); err != nil {
		t.Fatal(err)
	}
	errs := n.s.WriteAll(ctx, []Write{{Object: volume("other", "v1", "1")}, {Object: config("other", "c1", "x")}})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n.s.fsm.pendingDeltas() < 3 {
		t.Fatalf("%d deltas pending: the test needs them out of the file", n.s.fsm.pendingDeltas())
	}
	list := func(kind legion.Kind, ns string) []string {
		t.Helper()
		objs, _, err := n.s.List(kind, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.GetMetadata().Namespace+"/"+o.GetMetadata().Name)
		}
		return out
	}
	for _, c := range []struct {
		kind legion.Kind
		ns   string
		want []string
	}{
		{legion.KindVolume, "", []string{"other/v1"}},
		{legion.KindVolume, "default", nil},
		{legion.KindConfig, "default", []string{"default/c0", "default/c1", "default/c2", "default/c9"}},
		{legion.KindConfig, "", []string{"default/c0", "default/c1", "default/c2", "default/c9", "other/c1"}},
		{legion.KindNamespace, "", nil},
	} {
		if diff := cmp.Diff(c.want, list(c.kind, c.ns)); diff != "" {
			t.Errorf("list of %s in %q (-want +got):\n%s", c.kind, c.ns, diff)
		}
		// Count sees what List does, over the file and the pending changes.
		if n, err := n.s.Count(c.kind, c.ns); err != nil || n != len(c.want) {
			t.Errorf("count of %s in %q: %d, %v; want %d", c.kind, c.ns, n, err, len(c.want))
		}
	}
}

// memSink is a snapshot sink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// A snapshot is the objects as they were when raft asked for it, between
// applies; it is copied from the file afterwards (Persist), while writes
// go on, and what they change is not in it.
func TestSnapshotIsTheStateItWasTakenAt(t *testing.T) {
	t.Parallel()
	n := openNodeKey(t, "m1", t.TempDir(), FastTiming(), newKey(t))
	t.Cleanup(func() { n.s.Close() })
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	putConfigs(t, n, 5)
	want, at := listConfigs(t, n.s)
	fs, err := n.s.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Release()
	if _, ok := fs.(*fileSnapshot); !ok {
		t.Fatalf("nothing pending, and the snapshot is a %T: the objects were copied on the apply goroutine", fs)
	}
	// Writes after it: a change, a new object, a deletion, all flushed.
	ctx := context.Background()
	if _, _, err := n.s.Put(ctx, config("default", "c1", "changed"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "later", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.s.Delete(ctx, legion.KindConfig, "default", "c0", Precondition{}); err != nil {
		t.Fatal(err)
	}
	if err := n.s.fsm.flush(); err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := fs.Persist(&sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("persist: %v (closed %v, cancelled %v)", err, sink.closed, sink.cancelled)
	}
	var s snapshotData
	if err := json.Unmarshal(sink.Bytes(), &s); err != nil {
		t.Fatalf("the snapshot does not decode as snapshotData: %v", err)
	}
	var got []listed
	for _, raw := range s.Objects {
		o, err := legion.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		m := o.GetMetadata()
		got = append(got, listed{Name: m.Name, Data: string(o.(*legion.Config).Spec.Data), UID: m.UID,
			Version: m.Version, Generation: m.Generation})
	}
	if s.Index != at || !cmp.Equal(got, want) {
		t.Fatalf("snapshot at %d holds %v\nwant at %d: %v", s.Index, got, at, want)
	}
}

// A delta's key filter never says a key it was given is missing, and says
// most others are: a read passes over the deltas that lack its key.
func TestKeyFilterKnowsItsKeys(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 15, 512} { // one write, a busy batch, raft's largest
		var f keyFilter
		for i := range n {
			f.add(keyHash([]byte(fmt.Sprintf("Task/default/web-%d", i))))
		}
		for i := range n {
			if !f.mayHold(keyHash([]byte(fmt.Sprintf("Task/default/web-%d", i)))) {
				t.Fatalf("%d keys: key %d reported missing", n, i)
			}
		}
		passed := 0
		for i := range 10000 {
			if !f.mayHold(keyHash([]byte(fmt.Sprintf("Config/default/other-%d", i)))) {
				passed++
			}
		}
		// Two bits a key in 2,048: about 1-(1-e^(-2n/2048))^2 of the others.
		if want := map[int]int{1: 9900, 15: 9900, 512: 7000}[n]; passed < want {
			t.Errorf("%d keys: %d of 10,000 other keys passed over, want at least %d", n, passed, want)
		}
	}
}

// The file's applied index, which every read takes, is remembered per
// committed transaction: each commit's is read afresh, and one a write
// transaction set and then rolled back is never taken for the next
// commit's, whose transaction ID it had.
func TestTheFilesAppliedIndexIsReadAfreshAfterEachCommit(t *testing.T) {
	t.Parallel()
	n := leaderIn(t, t.TempDir())
	defer n.s.Close()
	ctx := context.Background()
	written := func(name string) uint64 {
		t.Helper()
		o, _, err := n.s.Put(ctx, config("default", name, "x"), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.s.fsm.flush(); err != nil {
			t.Fatal(err)
		}
		return o.GetMetadata().Version
	}
	fileAt := func() uint64 {
		t.Helper()
		p, err := n.s.fsm.fileApplied()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, name := range []string{"a", "b", "c"} {
		v := written(name)
		for range 2 { // the second read is the remembered one
			if p := fileAt(); p != v {
				t.Fatalf("the file is at %d after %s was written at %d and flushed", p, name, v)
			}
		}
	}

	fileAtBefore := fileAt()
	tx, err := n.s.fsm.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.s.fsm.putApplied(tx, 1<<40); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	p, err := n.s.fsm.readApplied(tx)
	if rerr := tx.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || p != 1<<40 {
		t.Fatalf("a write transaction reads its own applied index as %d (%v), want %d", p, err, uint64(1<<40))
	}
	// The next commit, with no read between: it takes the ID the
	// rolled-back transaction had.
	at := fileAtBefore
	if err := n.s.fsm.db.Update(func(tx *bolt.Tx) error { return n.s.fsm.putApplied(tx, at) }); err != nil {
		t.Fatal(err)
	}
	if p := fileAt(); p != at {
		t.Fatalf("the file is at %d after a commit at %d (a rolled-back transaction's index is %d)", p, at, uint64(1<<40))
	}
	v := written("d")
	if p := fileAt(); p != v {
		t.Fatalf("the file is at %d after d was written at %d and flushed", p, v)
	}
}
