package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/logtest"
)

// openLogged opens m1 in dir (sealed under key) with its log lines in
// logs, which Raft's goroutines write to while the test reads it.
func openLogged(t *testing.T, dir string, key []byte, logs *logtest.Buffer) *Store {
	t.Helper()
	_, tr := raft.NewInmemTransport("m1")
	s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming(), WriteTimeout: 10 * time.Second, Key: key,
		Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A store file that is mostly free pages (objects since deleted) is
// rewritten without them when the store opens: smaller, with every
// object, version and the Raft state as they were, and the store goes
// on writing. One that is not is left as it is, and so is the file when
// the rewrite has nothing to gain. Not parallel: it lowers the threshold
// for the stores it opens.
func TestStoreFileCompactedAtOpenWhenMostlyFree(t *testing.T) {
	defer func(old int64) { compactMinFree = old }(compactMinFree)
	compactMinFree = 1 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	key := newKey(t)
	var logs logtest.Buffer
	s := openLogged(t, dir, key, &logs)
	if err := s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, s.IsLeader)
	ctx := t.Context()
	for i := range 400 {
		if _, _, err := s.Put(ctx, config("default", fmt.Sprint("c", i), strings.Repeat("x", 40<<10)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 390 {
		if _, err := s.Delete(ctx, legion.KindConfig, "default", fmt.Sprint("c", i), Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
	want, wantAt := listConfigs(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)

	s = openLogged(t, dir, key, &logs)
	after := fileSize(t, path)
	if after*2 > before {
		s.Close()
		t.Fatalf("store file %d bytes after opening, %d before: not compacted (log: %s)", after, before, logs.String())
	}
	if !strings.Contains(logs.String(), "store file compacted") {
		s.Close()
		t.Fatalf("compacted without saying so; log: %s", logs.String())
	}
	got, at := listConfigs(t, s)
	if at != wantAt {
		t.Errorf("read after compaction at %d, want %d", at, wantAt)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects after compaction (-want +got):\n%s", diff)
	}
	// Raft's term and vote came along: the store leads again and writes.
	waitFor(t, "leader after compaction", 5*time.Second, s.IsLeader)
	if _, _, err := s.Put(ctx, config("default", "later", "y"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Nothing left to gain: opened as it is.
	var again logtest.Buffer
	before = fileSize(t, path)
	s = openLogged(t, dir, key, &again)
	defer s.Close()
	if got := fileSize(t, path); got != before || strings.Contains(again.String(), "compacted") {
		t.Fatalf("a compact file was rewritten: %d bytes, %d before; log: %s", got, before, again.String())
	}
}

// What a compaction cut short leaves (its copy, not yet in place of the
// file) is removed at the next open, and the file opens whole.
func TestInterruptedCompactionLeavesTheFileWhole(t *testing.T) {
	t.Parallel()
	dir := storeWithObjects(t)
	tmp := filepath.Join(dir, FileName) + compactSuffix
	if err := os.WriteFile(tmp, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := openNode(t, "m1", dir)
	defer n.s.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the interrupted copy is still there: %v", err)
	}
	objs, _, err := n.s.List(legion.KindConfig, "default", nil)
	if err != nil || len(objs) != 300 {
		t.Fatalf("after an interrupted compaction: %d objects, %v; want the 300 stored", len(objs), err)
	}
}

// A rewrite that cannot be made is logged and the store opens on its file
// as it was.
func TestFailedCompactionOpensTheFileAsItWas(t *testing.T) {
	t.Parallel()
	dir := storeWithObjects(t)
	// What stands where the copy goes cannot be removed: a directory
	// holding a file.
	tmp := filepath.Join(dir, FileName) + compactSuffix
	if err := os.MkdirAll(filepath.Join(tmp, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, filepath.Join(dir, FileName))
	var logs logtest.Buffer
	s := openLogged(t, dir, nil, &logs)
	defer s.Close()
	if !strings.Contains(logs.String(), "the store file was not compacted; it is used as it is") {
		t.Fatalf("a failed compaction was not logged; log: %s", logs.String())
	}
	if got := fileSize(t, filepath.Join(dir, FileName)); got != before {
		t.Fatalf("store file %d bytes after a failed compaction, %d before", got, before)
	}
	objs, _, err := s.List(legion.KindConfig, "default", nil)
	if err != nil || len(objs) != 300 {
		t.Fatalf("after a failed compaction: %d objects, %v; want the 300 stored", len(objs), err)
	}
}
