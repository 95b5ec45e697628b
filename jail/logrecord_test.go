package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func stepClock(start time.Time) func() time.Time {
	n := 0
	return func() time.Time {
		n++
		return start.Add(time.Duration(n) * time.Millisecond)
	}
}

func TestLogRecordsFullAndPartial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lf := &LogFile{Path: filepath.Join(dir, "log"), Now: stepClock(t0)}
	out := &StreamWriter{Log: lf, Stream: StreamStdout}
	errw := &StreamWriter{Log: lf, Stream: StreamStderr}
	long := strings.Repeat("x", MaxLogLine+10)
	for _, w := range []struct {
		w    *StreamWriter
		data string
	}{
		{out, "hello "}, {out, "world\nsecond"}, {errw, "oops\n"}, {out, " line\n"},
		{out, long + "\n"}, {errw, "no newline at the end"},
	} {
		if _, err := w.w.Write([]byte(w.data)); err != nil {
			t.Fatal(err)
		}
	}
	out.Close()
	errw.Close()
	lf.Close()
	data, err := os.ReadFile(lf.Path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != "2026-11-30T12:00:00.001Z stdout F hello world" {
		t.Fatalf("first line %q", lines[0])
	}
	recs, err := ReadLogs(lf.Path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		Stream  string
		Partial bool
		Text    string
	}
	var got []rec
	for _, r := range recs {
		got = append(got, rec{r.Stream, r.Partial, r.Text})
	}
	want := []rec{
		{"stdout", false, "hello world"},
		{"stderr", false, "oops"},
		{"stdout", false, "second line"},
		{"stdout", true, long[:MaxLogLine]},
		{"stdout", false, "xxxxxxxxxx"},
		{"stderr", false, "no newline at the end"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("records (-want +got):\n%s", d)
	}
	since, err := ReadLogs(lf.Path, t0.Add(3*time.Millisecond))
	if err != nil || len(since) != 4 {
		t.Fatalf("since the third record: %d records %v, want 4", len(since), err)
	}
}

func TestLogRotationKeepsOneOldFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lf := &LogFile{Path: filepath.Join(dir, "log"), MaxSize: 200, Now: stepClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	// Each record is 24+1+6+1+1+1+20+1 = 55 bytes: three fit in 200.
	for i := 0; i < 10; i++ {
		if err := lf.Append(StreamStdout, false, []byte(strings.Repeat(string(rune('a'+i)), 20))); err != nil {
			t.Fatal(err)
		}
	}
	lf.Close()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if d := cmp.Diff([]string{"log", "log.1"}, names); d != "" {
		t.Fatalf("files (-want +got):\n%s", d)
	}
	for _, name := range names {
		st, _ := os.Stat(filepath.Join(dir, name))
		if st.Size() > 200 {
			t.Fatalf("%s is %d bytes, over the rotation size", name, st.Size())
		}
	}
	recs, err := ReadLogs(lf.Path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for _, r := range recs {
		first = append(first, r.Text[:1])
	}
	// Three records per file: rotations at d, g and j leave log.1 with
	// g-i and log with j; a-f are gone.
	if d := cmp.Diff([]string{"g", "h", "i", "j"}, first); d != "" {
		t.Fatalf("records kept, oldest first (-want +got):\n%s", d)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add("2026-11-30T12:00:00.001Z stdout F hello world")
	f.Add("2026-11-30T12:00:00Z stderr P ")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseRecord(line)
		if err != nil {
			return
		}
		if strings.ContainsAny(r.Text, "\n") {
			return // a text with a newline does not round-trip by design
		}
		again, err := ParseRecord(FormatRecord(r))
		if err != nil || again.Text != r.Text || again.Stream != r.Stream || again.Partial != r.Partial || !again.Time.Equal(r.Time) {
			t.Fatalf("round trip of %q: %+v %v", line, again, err)
		}
	})
}

func TestLogFollowerAcrossRotations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lf := &LogFile{Path: filepath.Join(dir, "log"), MaxSize: 200, Now: stepClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	f := &LogFollower{Path: lf.Path}
	var got []string
	next := func() {
		t.Helper()
		recs, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.Text[:1])
		}
	}
	next() // nothing yet
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if err := lf.Append(StreamStdout, false, []byte(strings.Repeat(string(rune('a'+i)), 20))); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 2)
	next()
	write(2, 5) // rotates once (at d)
	next()
	write(5, 6)
	next()
	// Half a line is not a record yet.
	fh, _ := os.OpenFile(lf.Path, os.O_WRONLY|os.O_APPEND, 0)
	fh.WriteString("2026-11-30T12:00:01Z stdout F tail")
	next()
	fh.WriteString("ed\n")
	fh.Close()
	next()
	lf.Close()
	if d := cmp.Diff([]string{"a", "b", "c", "d", "e", "f", "t"}, got); d != "" {
		t.Fatalf("followed (-want +got):\n%s", d)
	}
	// A new follower starts with everything kept: the rotated file first.
	f2 := &LogFollower{Path: lf.Path}
	recs, err := f2.Next()
	if err != nil || len(recs) != 7 || recs[0].Text[:1] != "a" {
		t.Fatalf("fresh follower: %d records %v", len(recs), err)
	}
}

// What a container wrote last is read though its directory is removed
// before the follower looked again (a task's pod goes as soon as the task
// ends): legion logs -f of a job lost its last line so.
func TestLogFollowerReadsTheLastLinesOfARemovedLog(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "container")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lf := &LogFile{Path: filepath.Join(dir, "log"), MaxSize: 1 << 20, Now: stepClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { lf.Close() })
	f := &LogFollower{Path: lf.Path}
	t.Cleanup(func() { f.Close() })
	if err := lf.Append(StreamStdout, false, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if recs, err := f.Next(); err != nil || len(recs) != 1 || recs[0].Text != "first" {
		t.Fatalf("first read: %+v %v", recs, err)
	}
	if err := lf.Append(StreamStdout, false, []byte("through")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	recs, err := f.Next()
	if err != nil || len(recs) != 1 || recs[0].Text != "through" {
		t.Fatalf("after the removal: %+v %v, want the last line", recs, err)
	}
	if recs, err := f.Next(); err != nil || len(recs) != 0 {
		t.Fatalf("once read to its end: %+v %v", recs, err)
	}
}
