package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/logtest"
)

// fakeDisk stands for a file system that may fill up: while full, a
// write within a file's current length lands (its blocks exist) and one
// reaching past it stops at the length with ENOSPC, as write(2) does.
type fakeDisk struct {
	full    atomic.Bool
	refused atomic.Int64 // writes cut short
}

func (d *fakeDisk) writeAt(f *os.File, b []byte, off int64) (int, error) {
	if !d.full.Load() {
		return f.WriteAt(b, off)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	room := max(0, fi.Size()-off)
	if int64(len(b)) <= room {
		return f.WriteAt(b, off)
	}
	d.refused.Add(1)
	n, err := f.WriteAt(b[:room], off)
	if err != nil {
		return n, err
	}
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

// onDisk makes w write through d.
func onDisk(w *walLog, d *fakeDisk) {
	w.change.Lock()
	w.writeAt = d.writeAt
	w.change.Unlock()
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func bigEntries(from, to uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, size)})
	}
	return out
}

// On a full disk the log makes no room ahead any more and says so
// (ErrLogFull, ENOSPC, its directory), but appends what fits in the room
// it has, keeps that room when an append does not fit (so raft's small
// entries still land), keeps it across a reopen, and takes appends again
// once space is freed.
func TestWALKeepsItsRoomOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := openWAL(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	var d fakeDisk
	onDisk(w, &d)
	if err := w.StoreLogs(entries(1, 3)); err != nil {
		t.Fatal(err)
	}
	path := w.segPath(1)
	d.full.Store(true)
	room := fileSize(t, path)
	// Entries of 100 KiB until one is refused: the first fits only while
	// the room ahead lasts.
	next := uint64(4)
	var refused error
	for ; next < 100 && refused == nil; next++ {
		refused = w.StoreLogs(bigEntries(next, next, 100<<10))
	}
	next--
	if !errors.Is(refused, ErrLogFull) || !errors.Is(refused, syscall.ENOSPC) || !strings.Contains(refused.Error(), dir) {
		t.Fatalf("append on a full disk: %v, want ErrLogFull with ENOSPC naming %s", refused, dir)
	}
	if next-4 < 5 {
		t.Fatalf("only %d appends of 100 KiB went into a room of %d bytes ahead", next-4, room)
	}
	if got := fileSize(t, path); got < room {
		t.Fatalf("segment shrank from %d to %d bytes after a failed append: its room is gone", room, got)
	}
	if w.room(0) == nil {
		t.Fatal("the log does not report itself full")
	}
	// Raft's own entries are small and still land.
	if err := w.StoreLogs(entries(next, next+2)); err != nil {
		t.Fatalf("small entries after a refused one: %v", err)
	}
	w.Close()
	w, err = openWAL(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	onDisk(w, &d)
	if got := fileSize(t, path); got < room {
		t.Fatalf("segment of %d bytes after a reopen, had %d: the room ahead was cut off", got, room)
	}
	if err := w.StoreLogs(entries(next+3, next+3)); err != nil {
		t.Fatalf("small entry after a reopen on a full disk: %v", err)
	}
	d.full.Store(false)
	if err := w.room(0); err != nil {
		t.Fatalf("room once space is freed: %v", err)
	}
	if err := w.StoreLogs(bigEntries(next+4, next+13, 100<<10)); err != nil {
		t.Fatalf("appends once space is freed: %v", err)
	}
	l, _ := w.LastIndex()
	if l != next+13 {
		t.Fatalf("last entry %d, want %d", l, next+13)
	}
	var e raft.Log
	if err := w.GetLog(3, &e); err != nil || string(e.Data) != "entry 3" {
		t.Fatalf("entry 3 after it all: %q %v", e.Data, err)
	}
}

// A segment past its size takes more appends while the disk has no room
// for a new one, leaving no empty segment behind; once space is freed
// the next append starts the new segment.
func TestWALStaysInItsSegmentOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := openSmallWAL(t, dir)
	t.Cleanup(func() { w.Close() })
	var d fakeDisk
	onDisk(w, &d)
	if err := w.StoreLogs(entries(1, 5)); err != nil {
		t.Fatal(err)
	}
	before := segmentFiles(t, dir)
	d.full.Store(true)
	if err := w.StoreLogs(entries(6, 6)); err != nil {
		t.Fatalf("append past the segment size on a full disk: %v", err)
	}
	if got := segmentFiles(t, dir); !slicesEqual(got, before) {
		t.Fatalf("segments %v after an append on a full disk, want %v", got, before)
	}
	if !errors.Is(w.room(0), ErrLogFull) {
		t.Fatal("the log does not report itself full after failing to start a segment")
	}
	d.full.Store(false)
	if err := w.StoreLogs(entries(7, 7)); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); len(got) != len(before)+1 || w.tail().base != 7 {
		t.Fatalf("segments %v once space is freed, want a new one from entry 7 after %v", got, before)
	}
	if w.room(0) != nil {
		t.Fatal("still full after a new segment got its room")
	}
	w.Close()
	w = openSmallWAL(t, dir)
	checkLog(t, w, 1, 7)
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// watchedDisk puts n's log on a fake disk and starts watching its
// leadership: the states raft goes through from now, and the term it is
// in now.
func watchedDisk(t *testing.T, n *node) (*fakeDisk, func() []raft.RaftState, uint64) {
	t.Helper()
	d := &fakeDisk{}
	onDisk(n.s.logs.wal, d)
	return d, leaderWatch(t, n.s.raft), n.s.raft.CurrentTerm()
}

// leaderWatch records every raft state change after it starts.
func leaderWatch(t *testing.T, r *raft.Raft) func() []raft.RaftState {
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.RaftState)
		return ok
	})
	var mu sync.Mutex
	var seen []raft.RaftState
	done := make(chan struct{})
	t.Cleanup(func() {
		r.DeregisterObserver(obs)
		close(done)
	})
	r.RegisterObserver(obs)
	go func() {
		for {
			select {
			case <-done:
				return
			case o := <-ch:
				mu.Lock()
				seen = append(seen, o.Data.(raft.RaftState))
				mu.Unlock()
			}
		}
	}()
	return func() []raft.RaftState {
		mu.Lock()
		defer mu.Unlock()
		return append([]raft.RaftState(nil), seen...)
	}
}

// fillUntilRefused writes 200 KiB configs on n until one is refused,
// returning those acknowledged and the refusal.
func fillUntilRefused(t *testing.T, s *Store, acked map[string]string) error {
	t.Helper()
	ctx := context.Background()
	for i := range 200 {
		name := fmt.Sprint("big-", i)
		text := strings.Repeat(name, (200<<10)/len(name))
		if _, _, err := s.Put(ctx, config("default", name, text), WriteOptions{}); err != nil {
			return err
		}
		acked[name] = text
	}
	t.Fatal("200 writes of 200 KiB were all taken on a full disk")
	return nil
}

// checkAcked asserts every acknowledged write reads back.
func checkAcked(t *testing.T, s *Store, acked map[string]string) {
	t.Helper()
	for name, text := range acked {
		o, _, err := s.Get(legion.KindConfig, "default", name)
		if err != nil {
			t.Fatalf("acknowledged %s: %v", name, err)
		}
		if got := string(o.(*legion.Config).Spec.Data); got != text {
			t.Fatalf("acknowledged %s reads %d bytes, want %d", name, len(got), len(text))
		}
	}
}

// The only manager on a full disk refuses writes with an error naming the
// disk's trouble and the log's directory, keeps leading (no election, no
// new term) over several heartbeat timeouts, and keeps answering Get,
// List, Watch and linearizable reads; once space is freed it takes writes
// again, and every acknowledged write is there, also after a restart.
func TestFullDiskKeepsTheOnlyManagerLeading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := openNode(t, "m1", dir)
	t.Cleanup(func() { n.s.Close() })
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	ctx := context.Background()
	w, err := n.s.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]string{}
	for _, name := range []string{"a", "b"} {
		if _, _, err := n.s.Put(ctx, config("default", name, name), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		acked[name] = name
	}
	d, states, term := watchedDisk(t, n)

	d.full.Store(true)
	refused := fillUntilRefused(t, n.s, acked)
	logDir := filepath.Join(dir, LogDir)
	if !errors.Is(refused, ErrLogFull) || !errors.Is(refused, syscall.ENOSPC) || !strings.Contains(refused.Error(), logDir) {
		t.Fatalf("write on a full disk: %v, want ErrLogFull with ENOSPC naming %s", refused, logDir)
	}
	// Several heartbeat timeouts of refused writes and answered reads.
	period := 4 * FastTiming().HeartbeatTimeout
	probe := time.NewTicker(20 * time.Millisecond)
	defer probe.Stop()
	for start := time.Now(); time.Since(start) < period; <-probe.C {
		if _, _, err := n.s.Put(ctx, config("default", "late", "x"), WriteOptions{}); !errors.Is(err, ErrLogFull) {
			t.Fatalf("write while full: %v, want ErrLogFull (raft went through %v)", err, states())
		}
		if _, _, err := n.s.Get(legion.KindConfig, "default", "a"); err != nil {
			t.Fatalf("get while full: %v", err)
		}
		if l, _, err := n.s.List(legion.KindConfig, "default", nil); err != nil || len(l) != len(acked) {
			t.Fatalf("list while full: %d objects, %v; want %d", len(l), err, len(acked))
		}
		if err := n.s.Barrier(ctx); err != nil {
			t.Fatalf("linearizable read while full: %v", err)
		}
		if _, err := n.s.Watch(0); err != nil {
			t.Fatalf("watch while full: %v", err)
		}
	}
	if got := states(); len(got) != 0 || !n.s.IsLeader() || n.s.raft.CurrentTerm() != term {
		t.Fatalf("on a full disk raft went through %v, term %d -> %d: leadership was lost", got, term, n.s.raft.CurrentTerm())
	}
	if d.refused.Load() == 0 {
		t.Fatal("the fake disk refused nothing: the test did not fill it")
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range len(acked) {
		e, err := w.Next(wctx)
		if err != nil {
			t.Fatalf("watch opened before the disk filled: %v", err)
		}
		if _, ok := acked[e.Object.GetMetadata().Name]; !ok || e.Type != Added {
			t.Fatalf("watch event %v %s, want an acknowledged write", e.Type, e.Object.GetMetadata().Name)
		}
	}

	d.full.Store(false)
	if _, _, err := n.s.Put(ctx, config("default", "after", "freed"), WriteOptions{}); err != nil {
		t.Fatalf("write once space is freed: %v", err)
	}
	acked["after"] = "freed"
	checkAcked(t, n.s, acked)
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, "m1", dir)
	t.Cleanup(func() { n.s.Close() })
	waitFor(t, "leader after a restart", 5*time.Second, n.s.IsLeader)
	checkAcked(t, n.s, acked)
}

// A flush that fails (the store file's disk full) neither stops the loop
// nor waits for another apply to try again: it retries on its own, logs
// the error once however often it repeats, and says when flushing works
// again.
func TestFlusherRetriesAFailedFlushAndLogsOnce(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	kick := make(chan struct{}, 1)
	var calls atomic.Int64
	const failures = 2
	flush := func() error {
		if calls.Add(1) <= failures {
			return &os.PathError{Op: "write", Path: "store.db", Err: syscall.ENOSPC}
		}
		return nil
	}
	var logged logtest.Buffer
	done := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	go func() {
		defer close(done)
		flushLoop(stop, kick, flush, logged.Logger())
	}()
	kick <- struct{}{}
	// One kick only: the retries come from the loop itself.
	waitFor(t, "flush retried until it works", failures*flushRetry+5*time.Second, func() bool {
		return calls.Load() > failures
	})
	waitFor(t, "recovery logged", 5*time.Second, func() bool {
		return strings.Contains(logged.String(), "works again")
	})
	out := logged.String()
	if n := strings.Count(out, "no space left on device"); n != 1 {
		t.Fatalf("the same flush error logged %d times, want once:\n%s", n, out)
	}
	if calls.Load() != failures+1 {
		t.Fatalf("%d flushes, want %d: it went on flushing with nothing to do", calls.Load(), failures+1)
	}
}

// Of three managers, the leader's disk fills: it keeps leading (same
// leader, same term, followers still following it) and refuses writes
// with ErrLogFull rather than step down, so the cluster takes no writes
// until space is freed there; reads go on on every manager, and every
// acknowledged write is on all three. Once space is freed writes resume
// and reach the followers.
func TestFullDiskOnTheLeaderOfThree(t *testing.T) {
	t.Parallel()
	// What is tested is the full disk, and raft steps a leader down at
	// once when an append fails, whatever its lease.
	timing := SteadyTiming()
	ns := threeNodesTiming(t, timing)
	closeAtEnd(t, ns)
	leader := ns[0]
	var d fakeDisk
	onDisk(leader.s.logs.wal, &d)
	states := leaderWatch(t, leader.s.raft)
	term := leader.s.raft.CurrentTerm()
	acked := map[string]string{}
	d.full.Store(true)
	if refused := fillUntilRefused(t, leader.s, acked); !errors.Is(refused, ErrLogFull) || !errors.Is(refused, syscall.ENOSPC) {
		t.Fatalf("write on the full leader: %v, want ErrLogFull with ENOSPC", refused)
	}
	ctx := context.Background()
	probe := time.NewTicker(20 * time.Millisecond)
	defer probe.Stop()
	// Long enough for a follower that stopped hearing the leader to call
	// an election.
	for start := time.Now(); time.Since(start) < 2*timing.HeartbeatTimeout; <-probe.C {
		if _, _, err := leader.s.Put(ctx, config("default", "late", "x"), WriteOptions{}); !errors.Is(err, ErrLogFull) {
			t.Fatalf("write while the leader is full: %v, want ErrLogFull (raft went through %v)", err, states())
		}
		for _, n := range ns {
			if _, id := n.s.Leader(); id != leader.id {
				t.Fatalf("%s sees leader %q, want %s", n.id, id, leader.id)
			}
		}
	}
	if got := states(); len(got) != 0 || leader.s.raft.CurrentTerm() != term {
		t.Fatalf("the full leader went through %v, term %d -> %d", got, term, leader.s.raft.CurrentTerm())
	}
	for _, n := range ns {
		waitFor(t, n.id+" applying every acknowledged write", 5*time.Second, func() bool {
			return n.s.AppliedIndex() >= leader.s.AppliedIndex()
		})
		checkAcked(t, n.s, acked)
	}
	d.full.Store(false)
	if _, _, err := leader.s.Put(ctx, config("default", "after", "freed"), WriteOptions{}); err != nil {
		t.Fatalf("write once space is freed: %v", err)
	}
	acked["after"] = "freed"
	for _, n := range ns {
		waitFor(t, n.id+" applying the write after", 5*time.Second, func() bool {
			return n.s.AppliedIndex() >= leader.s.AppliedIndex()
		})
		checkAcked(t, n.s, acked)
	}
}

// A write bigger than the room left ahead, the first to meet the full
// disk, is refused before raft sees it: proposed, its append would fail
// and the leader step down.
func TestFullDiskRefusesAWriteBiggerThanTheRoomLeft(t *testing.T) {
	t.Parallel()
	n := single(t)
	d, states, term := watchedDisk(t, n)
	d.full.Store(true)
	ahead := n.s.logs.wal.ahead.Load()
	text := strings.Repeat("x", int(ahead)) // its entry is bigger still (base64)
	ctx := context.Background()
	if _, _, err := n.s.Put(ctx, config("default", "big", text), WriteOptions{}); !errors.Is(err, ErrLogFull) {
		t.Fatalf("write of %d bytes with %d bytes of room left on a full disk: %v, want ErrLogFull", len(text), ahead, err)
	}
	// Raft's own entries still land: a read barrier in this term.
	if err := n.s.Barrier(ctx); err != nil {
		t.Fatalf("linearizable read on a full disk: %v", err)
	}
	if got := states(); len(got) != 0 || !n.s.IsLeader() || n.s.raft.CurrentTerm() != term {
		t.Fatalf("raft went through %v, term %d -> %d: leadership was lost", got, term, n.s.raft.CurrentTerm())
	}
	d.full.Store(false)
	if _, _, err := n.s.Put(ctx, config("default", "big", text), WriteOptions{}); err != nil {
		t.Fatalf("the same write once space is freed: %v", err)
	}
	checkAcked(t, n.s, map[string]string{"big": text})
}

// A bulk write (the controllers' path) is held to the same room as a
// single one: on a full disk the window is refused as a whole with
// ErrLogFull, nothing reaches the log, and the leader stays.
func TestFullDiskRefusesABulkWrite(t *testing.T) {
	t.Parallel()
	n := single(t)
	d, states, term := watchedDisk(t, n)
	d.full.Store(true)
	ahead := int(n.s.logs.wal.ahead.Load())
	// Each write fits alone; together they are more than the room left.
	var writes []Write
	for i := 0; i*ahead/4 < 2*ahead; i++ {
		writes = append(writes, Write{Object: config("default", fmt.Sprintf("bulk-%d", i), strings.Repeat("x", ahead/4))})
	}
	before := n.s.raft.LastIndex()
	for i, err := range n.s.WriteAll(context.Background(), writes) {
		if !errors.Is(err, ErrLogFull) {
			t.Fatalf("write %d of %d on a full disk: %v, want ErrLogFull", i, len(writes), err)
		}
	}
	if after := n.s.raft.LastIndex(); after != before {
		t.Fatalf("refused writes reached the log: last index %d -> %d", before, after)
	}
	if got := states(); len(got) != 0 || !n.s.IsLeader() || n.s.raft.CurrentTerm() != term {
		t.Fatalf("raft went through %v, term %d -> %d: leadership was lost", got, term, n.s.raft.CurrentTerm())
	}
	d.full.Store(false)
	for i, err := range n.s.WriteAll(context.Background(), writes[:2]) {
		if err != nil {
			t.Fatalf("write %d once space is freed: %v", i, err)
		}
	}
}
