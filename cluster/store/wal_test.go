package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/legionbsd/legion/internal/logtest"
)

var quiet = slog.New(slog.DiscardHandler)

func entry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d", i)),
		AppendedAt: time.Unix(int64(i), 0)}
}

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i))
	}
	return out
}

// smallSegments makes a log whose segments take two or three entries.
func openSmallWAL(t *testing.T, dir string) *walLog {
	t.Helper()
	w, err := openWAL(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	w.segMax = 100
	return w
}

// checkLog asserts the log's range and that every entry in it reads back
// as written.
func checkLog(t *testing.T, w *walLog, first, last uint64) {
	t.Helper()
	f, _ := w.FirstIndex()
	l, _ := w.LastIndex()
	if f != first || l != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, l, first, last)
	}
	for i := first; i <= last && first != 0; i++ {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if diff := cmp.Diff(*entry(i), got); diff != "" {
			t.Fatalf("entry %d (-written +read):\n%s", i, diff)
		}
	}
	var got raft.Log
	if err := w.GetLog(last+1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry after the last: %v, want ErrLogNotFound", err)
	}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Entries survive a reopen across many segments; compaction drops whole
// segments from the head; a new leader's truncation cuts the tail, and
// appends carry on from there.
func TestWALKeepsTruncatesAndReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := openSmallWAL(t, dir)
	checkLog(t, w, 0, 0)
	for i := uint64(1); i <= 20; i += 4 {
		if err := w.StoreLogs(entries(i, i+3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.StoreLog(entry(21)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 1, 21)
	if n := len(segmentFiles(t, dir)); n < 4 {
		t.Fatalf("%d segments, want several: the test needs them", n)
	}
	if err := w.DeleteRange(1, 9); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 10, 21)
	if err := w.DeleteRange(17, 21); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 10, 16)
	if err := w.StoreLogs(entries(17, 19)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 10, 19)
	if err := w.DeleteRange(12, 14); err == nil {
		t.Fatal("deleting from the middle was accepted")
	}
	if err := w.StoreLog(entry(19)); err == nil {
		t.Fatal("appending over the last entry was accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w = openSmallWAL(t, dir)
	defer w.Close()
	// Entries before 10 in a segment that also holds later ones are kept
	// on disk: the first index may be lower after a reopen, never higher.
	f, _ := w.FirstIndex()
	if f > 10 || f == 0 {
		t.Fatalf("first index after reopen %d, want at most 10", f)
	}
	checkLog(t, w, f, 19)
	if err := w.StoreLogs(entries(20, 22)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, f, 22)
	if err := w.DeleteRange(f, 22); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 0, 0)
	if files := segmentFiles(t, dir); len(files) != 0 {
		t.Fatalf("segments left after deleting everything: %v", files)
	}
	// After a snapshot install the log starts again further on.
	if err := w.StoreLogs(entries(40, 41)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 40, 41)
}

// An append cut short by a crash (never acknowledged) is zeroed at open,
// keeping the room written ahead of it; the log carries on after the
// last whole entry.
func TestWALCutsATornAppend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// tear damages the file given where its last record starts and
		// where the records end.
		tear func(data []byte, last, end int64)
	}{
		{"cut short", func(data []byte, last, end int64) {
			// Only the header and a few bytes of the record reached the
			// disk.
			clear(data[last+walHeader+3 : end])
		}},
		{"garbage", func(data []byte, last, end int64) { data[end-2] ^= 0xff }},
		{"header only", func(data []byte, last, end int64) { clear(data[last+4 : end]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := openSmallWAL(t, dir)
			if err := w.StoreLogs(entries(1, 2)); err != nil {
				t.Fatal(err)
			}
			if err := w.StoreLogs(entries(3, 3)); err != nil {
				t.Fatal(err)
			}
			seg := w.tail()
			path, last, end := w.segPath(seg.base), seg.offs[len(seg.offs)-1], seg.size
			w.Close()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) <= end {
				t.Fatalf("segment of %d bytes, records end at %d: no zeros written ahead", len(data), end)
			}
			tc.tear(data, last, end)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var logged logtest.Buffer
			w, err = openWAL(dir, logged.Logger())
			if err != nil {
				t.Fatal(err)
			}
			checkLog(t, w, 1, 2)
			// Zeros replace the torn record; the room written ahead stays.
			after, err := os.ReadFile(path)
			if err != nil || len(after) != len(data) || bytes.ContainsFunc(after[last:], func(r rune) bool { return r != 0 }) {
				t.Fatalf("segment after open: %d bytes (%v), want %d with zeros from byte %d on", len(after), err, len(data), last)
			}
			if got := logged.String(); !strings.Contains(got, "torn append") || !strings.Contains(got, filepath.Base(path)) ||
				!strings.Contains(got, fmt.Sprintf("byte=%d", last)) || !strings.Contains(got, "entry=3") {
				t.Fatalf("cutting the torn append logged %q, want a warning naming the segment, byte %d and entry 3", got, last)
			}
			if err := w.StoreLog(entry(3)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			w = openSmallWAL(t, dir)
			defer w.Close()
			checkLog(t, w, 1, 3)
		})
	}
}

// Damage anywhere but the end of the last segment is not a torn append:
// opening fails rather than dropping acknowledged entries.
func TestWALRefusesADamagedOlderSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := openSmallWAL(t, dir)
	for i := uint64(1); i <= 9; i += 3 {
		if err := w.StoreLogs(entries(i, i+2)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files := segmentFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("segments %v, want several", files)
	}
	path := filepath.Join(dir, files[0])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[walHeader+3] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openWAL(dir, quiet); err == nil {
		t.Fatal("a damaged older segment was accepted")
	}
}

// A bad record with whole records after it in the last segment is
// damage, not a torn append (those later entries may have been
// acknowledged): opening refuses, naming the segment, the byte and the
// entries, and leaves the file as it was.
func TestWALRefusesDamageInTheMiddleOfTheLastSegment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(data []byte, at int64)
	}{
		{"payload", func(data []byte, at int64) { data[at+walHeader+12] ^= 0xff }},
		{"checksum", func(data []byte, at int64) { data[at+5] ^= 0x01 }},
		{"length", func(data []byte, at int64) { data[at] = 0x7f }},
		{"zeroed", func(data []byte, at int64) { clear(data[at : at+walHeader+10]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			w, err := openWAL(dir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			for i := uint64(1); i <= 30; i += 5 {
				if err := w.StoreLogs(entries(i, i+4)); err != nil {
					t.Fatal(err)
				}
			}
			seg := w.tail()
			path, at := w.segPath(seg.base), seg.offs[9] // entry 10
			if len(w.segs) != 1 {
				t.Fatalf("%d segments, want the entries in one (the last)", len(w.segs))
			}
			w.Close()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(data, at)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var logged logtest.Buffer
			w, err = openWAL(dir, logged.Logger())
			if err == nil {
				w.Close()
				t.Fatal("a log damaged in the middle of its last segment opened")
			}
			msg := err.Error()
			for _, want := range []string{filepath.Base(path), fmt.Sprintf("byte %d", at), "entry 10", "whole entry 11", "not a torn append"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(after, data) {
				t.Fatalf("the refused segment was changed (%v)", err)
			}
			if strings.Contains(logged.String(), "torn") {
				t.Fatalf("logged a torn append: %s", logged.String())
			}
		})
	}
}

// Appends, truncations and removals never leave a gap between segments,
// nor a record in another's place: either is damage, and opening fails
// rather than guess.
func TestWALRefusesAGapOrAMisplacedRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := openSmallWAL(t, dir)
	if err := w.StoreLogs(entries(1, 6)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	other := openSmallWAL(t, t.TempDir())
	if err := other.StoreLogs(entries(9, 10)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(other.segPath(9))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	stray := filepath.Join(dir, fmt.Sprintf("%020d%s", 9, walSuffix))
	if err := os.WriteFile(stray, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openWAL(dir, quiet); err == nil || !strings.Contains(err.Error(), "starts at entry 9") {
		t.Fatalf("open with a gap: %v", err)
	}
	// The same records under the name of the segment that follows on.
	if err := os.Rename(stray, filepath.Join(dir, fmt.Sprintf("%020d%s", 7, walSuffix))); err != nil {
		t.Fatal(err)
	}
	if _, err := openWAL(dir, quiet); err == nil || !strings.Contains(err.Error(), "holds entry 9, want 7") {
		t.Fatalf("open with a misplaced record: %v", err)
	}
}

// A store made when the log lived in the bbolt file moves it to the
// segments on its first open.
func TestBoltLogMovesToSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := openBolt(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, l := range append(entries(1, 2), entries(5, 8)...) {
			if err := tx.Bucket(bucketLog).Put(u64(l.Index), encodeLog(l)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := openSmallWAL(t, filepath.Join(dir, LogDir))
	if err := moveBoltLog(db, w); err != nil {
		t.Fatal(err)
	}
	// Only the entries after the gap: raft left the gap at a snapshot.
	checkLog(t, w, 5, 8)
	left := 0
	db.View(func(tx *bolt.Tx) error {
		left = tx.Bucket(bucketLog).Stats().KeyN
		return nil
	})
	if left != 0 {
		t.Fatalf("%d entries left in the bbolt file", left)
	}
	if err := moveBoltLog(db, w); err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 5, 8)
	w.Close()
	db.Close()
}

// Reads run while entries are appended and the head compacted (raft does
// both at once: appends from its main loop, compaction after a snapshot),
// and every entry read is as written.
func TestWALReadsWhileAppendingAndCompacting(t *testing.T) {
	t.Parallel()
	w := openSmallWAL(t, t.TempDir())
	defer w.Close()
	const total = 400
	done := make(chan error, 2)
	go func() {
		for i := uint64(1); i <= total; i += 4 {
			if err := w.StoreLogs(entries(i, i+3)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for {
			last, _ := w.LastIndex()
			if last > 20 {
				if err := w.DeleteRange(1, last-20); err != nil {
					done <- err
					return
				}
			}
			if last >= total {
				done <- nil
				return
			}
		}
	}()
	reads := 0
	for finished := 0; finished < 2; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
			continue
		default:
		}
		first, _ := w.FirstIndex()
		last, _ := w.LastIndex()
		for i := last; i >= first && i > 0 && i+10 > last; i-- {
			var got raft.Log
			err := w.GetLog(i, &got)
			if errors.Is(err, raft.ErrLogNotFound) {
				continue // compacted meanwhile
			}
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if diff := cmp.Diff(*entry(i), got); diff != "" {
				t.Fatalf("entry %d (-written +read):\n%s", i, diff)
			}
			reads++
		}
	}
	if reads == 0 {
		t.Fatal("no entry read while appending")
	}
	checkLog(t, w, total-19, total)
}

// An append's buffer is kept for the next one unless it is larger than
// walKeepRecords; what each append wrote reads back after the next one
// reused its buffer.
func TestWALKeepsOnlyASmallAppendBuffer(t *testing.T) {
	t.Parallel()
	w, err := openWAL(t.TempDir(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.StoreLogs(entries(1, 4)); err != nil {
		t.Fatal(err)
	}
	kept := cap(w.records)
	if kept == 0 || kept > walKeepRecords {
		t.Fatalf("after a small append the kept buffer holds %d bytes, want some and at most %d", kept, walKeepRecords)
	}
	large := entry(5)
	large.Data = bytes.Repeat([]byte("L"), 2*walKeepRecords)
	if err := w.StoreLogs([]*raft.Log{large}); err != nil {
		t.Fatal(err)
	}
	if c := cap(w.records); c != kept {
		t.Fatalf("after an append of %d bytes the kept buffer holds %d, want the small one's %d", len(large.Data), c, kept)
	}
	if err := w.StoreLogs(entries(6, 9)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 9; i++ {
		want := entry(i)
		if i == 5 {
			want = large
		}
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if diff := cmp.Diff(*want, got); diff != "" {
			t.Fatalf("entry %d (-written +read):\n%s", i, diff)
		}
	}
}
