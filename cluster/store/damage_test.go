package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// storeWithObjects makes a closed store of a few hundred objects (many
// pages) and returns its directory.
func storeWithObjects(t *testing.T) string {
	t.Helper()
	n := openNode(t, "m1", t.TempDir())
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	for i := range 300 {
		if _, _, err := n.s.Put(t.Context(), config("default", fmt.Sprint("c", i), strings.Repeat("x", 500+i*20)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	return n.dir
}

// copyDir copies a store's directory (files and the log's) to a new one.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// A damaged store file is refused with an error that names it and says
// what to do, never a panic or a fatal fault (bbolt maps the file: a file
// cut short faulted, garbage tripped its assertions).
func TestDamagedStoreFileIsRefusedClearly(t *testing.T) {
	t.Parallel()
	good := storeWithObjects(t)
	size := func(dir string) int64 {
		fi, err := os.Stat(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}(good)
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	type damage struct {
		name string
		do   func(path string) error
	}
	// What the file's meta page says it uses (the file is longer: bbolt
	// grows it ahead).
	head := make([]byte, 4096)
	if f, err := os.Open(filepath.Join(good, FileName)); err != nil {
		t.Fatal(err)
	} else if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	m := readBoltMeta(head)
	if m == nil {
		t.Fatal("no valid meta page in a good store file")
	}
	used := int64(m.pgid * m.pageSize)
	cases := []damage{
		{"truncated to half", func(p string) error { return os.Truncate(p, used/2) }},
		{"truncated to its meta pages", func(p string) error { return os.Truncate(p, 2*4096) }},
		{"truncated inside a meta page", func(p string) error { return os.Truncate(p, 100) }},
		{"all garbage", func(p string) error { return os.WriteFile(p, garbage(size), 0o600) }},
	}
	// Garbage over the pages after the meta pages, keeping the metas:
	// bbolt trusts them and follows whatever the pages say.
	for i := range 8 {
		cases = append(cases, damage{fmt.Sprint("garbage pages ", i), func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			at := 2*4096 + rng.Int64N(used-3*4096)
			_, err = f.WriteAt(garbage(min(used-at, 4096*(1+int64(i)))), at)
			return err
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, good)
			path := filepath.Join(dir, FileName)
			if err := tc.do(path); err != nil {
				t.Fatal(err)
			}
			_, tr := raft.NewInmemTransport("m1")
			s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming()})
			if err == nil {
				// Garbage may land on free pages, which nobody reads, or
				// inside a stored value (bbolt keeps no checksum of its
				// data pages): then the store is whole, or reading the
				// damaged object fails, naming it.
				defer s.Close()
				objs, _, err := s.List("Config", "default", nil)
				if err == nil && len(objs) != 300 || err != nil && !strings.Contains(err.Error(), "Config/default/c") {
					t.Fatalf("a damaged store opened and lists %d configs (%v)", len(objs), err)
				}
				return
			}
			msg := err.Error()
			for _, want := range []string{path, "damaged", "restore this manager from a backup", "join it to the cluster again from empty"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
}

// Losing store.db loses neither the term nor the vote (they are kept
// beside the log): a log that starts at its first entry rebuilds the
// objects; a log compacted behind a snapshot that went with store.db is
// refused, naming what is missing.
func TestLostStoreFileKeepsTermAndVote(t *testing.T) {
	t.Parallel()
	n := openNode(t, "m1", t.TempDir())
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	for i := range 5 {
		if _, _, err := n.s.Put(t.Context(), config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	term, err := n.s.logs.GetUint64([]byte("CurrentTerm"))
	if err != nil || term == 0 {
		t.Fatalf("term %d, %v", term, err)
	}
	voteTerm, err := n.s.logs.GetUint64([]byte("LastVoteTerm"))
	if err != nil {
		t.Fatal(err)
	}
	cand, err := n.s.logs.Get([]byte("LastVoteCand"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(n.dir, FileName)); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, "m1", n.dir)
	t.Cleanup(func() { n.s.Close() })
	if got, err := n.s.logs.GetUint64([]byte("CurrentTerm")); err != nil || got < term {
		t.Fatalf("term after losing store.db: %d (%v), want at least %d", got, err, term)
	}
	if got, _ := n.s.logs.GetUint64([]byte("LastVoteTerm")); got < voteTerm {
		t.Fatalf("vote term after losing store.db: %d, want at least %d", got, voteTerm)
	}
	if got, _ := n.s.logs.Get([]byte("LastVoteCand")); !bytes.Equal(got, cand) && voteTerm == term {
		t.Fatalf("vote after losing store.db: %q, want %q", got, cand)
	}
	waitFor(t, "the objects replayed from the log", 10*time.Second, func() bool {
		objs, _, err := n.s.List("Config", "default", nil)
		return err == nil && len(objs) == 5
	})

	// A log compacted behind a snapshot (here: starting at entry 10):
	// without store.db nothing holds what came before its first entry.
	// And a log whose term and vote are gone too.
	for _, withVote := range []bool{true, false} {
		dir := t.TempDir()
		logDir := filepath.Join(dir, LogDir)
		w, err := openWAL(logDir, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.StoreLogs(entries(10, 12)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if withVote {
			db, err := openBolt(filepath.Join(t.TempDir(), FileName))
			if err != nil {
				t.Fatal(err)
			}
			v, _, err := openVoteFile(logDir, db)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.set([]byte("CurrentTerm"), u64(3)); err != nil {
				t.Fatal(err)
			}
			v.close()
			db.Close()
		}
		_, tr := raft.NewInmemTransport("m1")
		s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming()})
		if err == nil {
			s.Close()
			t.Fatalf("a log from entry 10 without store.db (term and vote kept: %v) opened", withVote)
		}
		wants := []string{logDir, "term and vote are missing", "restore this manager from a backup"}
		if withVote {
			wants = []string{filepath.Join(dir, FileName), "starts at entry 10", "restore this manager from a backup"}
		}
		for _, want := range wants {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
}
