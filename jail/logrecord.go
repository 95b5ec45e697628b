package jail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// LogRotateSize is the size at which a container's log is rotated; one
// old file (<log>.1) is kept.
const LogRotateSize = 8 << 20

// MaxLogLine is the longest text one record holds; a longer line is split
// into partial (P) records ending with a full (F) one.
const MaxLogLine = 16 << 10

// LogRecord is one line of a container's log:
// "<RFC3339Nano time> <stdout|stderr> <F|P> <text>".
type LogRecord struct {
	Time    time.Time
	Stream  string
	Partial bool
	Text    string
}

// FormatRecord renders r as a log line, with its newline.
func FormatRecord(r LogRecord) string {
	tag := "F"
	if r.Partial {
		tag = "P"
	}
	return r.Time.UTC().Format(time.RFC3339Nano) + " " + r.Stream + " " + tag + " " + r.Text + "\n"
}

// ParseRecord reads one log line (with or without its newline).
func ParseRecord(line string) (LogRecord, error) {
	line = strings.TrimSuffix(line, "\n")
	parts := strings.SplitN(line, " ", 4)
	if len(parts) < 3 {
		return LogRecord{}, fmt.Errorf("log record %q: expected <time> <stream> <F|P> <text>", line)
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return LogRecord{}, fmt.Errorf("log record %q: time: %w", line, err)
	}
	if parts[1] != StreamStdout && parts[1] != StreamStderr {
		return LogRecord{}, fmt.Errorf("log record %q: stream %q: expected stdout or stderr", line, parts[1])
	}
	if parts[2] != "F" && parts[2] != "P" {
		return LogRecord{}, fmt.Errorf("log record %q: tag %q: expected F or P", line, parts[2])
	}
	r := LogRecord{Time: t, Stream: parts[1], Partial: parts[2] == "P"}
	if len(parts) == 4 {
		r.Text = parts[3]
	}
	return r, nil
}

// LogFile appends records to a container's log and rotates it at MaxSize,
// keeping one old file. It is safe for the two streams to share.
type LogFile struct {
	Path    string
	MaxSize int64            // LogRotateSize when zero
	Now     func() time.Time // time.Now when nil

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Append writes one record.
func (l *LogFile) Append(stream string, partial bool, text []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	line := FormatRecord(LogRecord{Time: now(), Stream: stream, Partial: partial, Text: string(text)})
	max := l.MaxSize
	if max <= 0 {
		max = LogRotateSize
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
	}
	if l.size > 0 && l.size+int64(len(line)) > max {
		if err := l.f.Close(); err != nil {
			return fmt.Errorf("log %s: %w", l.Path, err)
		}
		l.f = nil
		if err := os.Rename(l.Path, l.Path+".1"); err != nil {
			return fmt.Errorf("log %s: rotate: %w", l.Path, err)
		}
		if err := l.open(); err != nil {
			return err
		}
	}
	n, err := l.f.WriteString(line)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("log %s: %w", l.Path, err)
	}
	return nil
}

func (l *LogFile) open() error {
	f, err := os.OpenFile(l.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("log %s: %w", l.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("log %s: %w", l.Path, err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Close closes the file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// StreamWriter turns one stream's bytes into records of a LogFile. Close
// flushes an unfinished last line as a full record.
type StreamWriter struct {
	Log    *LogFile
	Stream string
	buf    []byte
}

// Write splits p into lines; a line longer than MaxLogLine is written as
// partial records.
func (w *StreamWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if err := w.emit(w.buf[:i]); err != nil {
			return len(p), err
		}
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) > MaxLogLine {
		if err := w.Log.Append(w.Stream, true, w.buf[:MaxLogLine]); err != nil {
			return len(p), err
		}
		w.buf = w.buf[MaxLogLine:]
	}
	w.buf = append([]byte(nil), w.buf...)
	return len(p), nil
}

func (w *StreamWriter) emit(line []byte) error {
	for len(line) > MaxLogLine {
		if err := w.Log.Append(w.Stream, true, line[:MaxLogLine]); err != nil {
			return err
		}
		line = line[MaxLogLine:]
	}
	return w.Log.Append(w.Stream, false, line)
}

// Close writes what is left as a full record.
func (w *StreamWriter) Close() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.Log.Append(w.Stream, false, w.buf)
	w.buf = nil
	return err
}

// ReadLogs returns the records of the log at path, the rotated file's
// first, from since on (all when zero).
func ReadLogs(path string, since time.Time) ([]LogRecord, error) {
	var out []LogRecord
	for _, p := range []string{path + ".1", path} {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", p, err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if line == "" {
				continue
			}
			r, err := ParseRecord(line)
			if err != nil {
				return nil, err
			}
			if !since.IsZero() && r.Time.Before(since) {
				continue
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// LogFollower reads a container's log as it grows, across rotations. The
// first Next returns everything there is (the rotated file's records
// first); each later one what was appended since, complete lines only.
// It holds the file it reads open, so what a container wrote last is
// still read after its directory is removed (a task's pod going as soon
// as the task ends) or the file rotated; Close lets it go.
type LogFollower struct {
	Path string

	started bool
	opened  bool     // a file of the log was read, the rotated one or the current
	file    *os.File // the file being read; nil until it exists
	off     int64
	partial []byte
}

// Unread reports whether no file of the log has been read yet: none was
// there at each Next so far (nothing written yet, or removed already).
func (f *LogFollower) Unread() bool { return !f.opened }

// Close releases the file being read.
func (f *LogFollower) Close() error {
	if f.file == nil {
		return nil
	}
	err := f.file.Close()
	f.file = nil
	return err
}

// Next returns the records not returned yet.
func (f *LogFollower) Next() ([]LogRecord, error) {
	var data []byte
	if !f.started {
		f.started = true
		old, err := os.ReadFile(f.Path + ".1")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("log %s.1: %w", f.Path, err)
		}
		data = old
		f.opened = err == nil
	}
	st, err := os.Stat(f.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("log %s: %w", f.Path, err)
	}
	if f.file != nil {
		held, err := f.file.Stat()
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", f.Path, err)
		}
		if st == nil || !os.SameFile(held, st) {
			// Rotated or removed: finish the file held, then take the new.
			rest, err := f.readHeld()
			if err != nil {
				return nil, err
			}
			data = append(data, rest...)
			f.Close()
			f.off = 0
		}
	}
	if f.file == nil && st != nil {
		fh, err := os.Open(f.Path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("log %s: %w", f.Path, err)
		}
		f.file = fh
		f.opened = f.opened || fh != nil
	}
	if f.file != nil {
		rest, err := f.readHeld()
		if err != nil {
			return nil, err
		}
		data = append(data, rest...)
	}
	data = append(f.partial, data...)
	end := bytes.LastIndexByte(data, '\n') + 1
	f.partial = append([]byte(nil), data[end:]...)
	var out []LogRecord
	for _, line := range strings.SplitAfter(string(data[:end]), "\n") {
		if line == "" {
			continue
		}
		r, err := ParseRecord(line)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readHeld reads the held file from where the last read ended.
func (f *LogFollower) readHeld() ([]byte, error) {
	if _, err := f.file.Seek(f.off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("log %s: %w", f.Path, err)
	}
	data, err := io.ReadAll(f.file)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", f.Path, err)
	}
	f.off += int64(len(data))
	return data, nil
}
