package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/legionbsd/legion/jail"
)

// Logs implements jail.Runtime: the container's log records, the rotated
// file's first; with Follow, new records as the supervisor writes them
// until ctx ends or the reader is closed.
func (r *Runtime) Logs(ctx context.Context, id string, opts jail.LogOptions) (io.ReadCloser, error) {
	if _, err := r.records.Get(id); err != nil {
		return nil, err
	}
	path := filepath.Join(r.records.Path(id), jail.LogFileName)
	recs, err := jail.ReadLogs(path, opts.Since)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, rec := range recs {
		buf.WriteString(jail.FormatRecord(rec))
	}
	if !opts.Follow {
		return io.NopCloser(&buf), nil
	}
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer pw.Close()
		if _, err := pw.Write(buf.Bytes()); err != nil {
			return
		}
		// Resume after the last record sent: its time, and how many
		// records of that time went already (records may share a time).
		var last time.Time
		atLast := 0
		note := func(t time.Time) {
			if t.Equal(last) {
				atLast++
			} else {
				last, atLast = t, 1
			}
		}
		for _, rec := range recs {
			note(rec.Time)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-r.clock.After(watchEvery):
			}
			more, err := readComplete(path, last)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			skip := atLast
			for _, rec := range more {
				if rec.Time.Equal(last) && skip > 0 {
					skip--
					continue
				}
				if _, err := pw.Write([]byte(jail.FormatRecord(rec))); err != nil {
					return
				}
				note(rec.Time)
			}
		}
	}()
	return &followReader{PipeReader: pr, stop: stop}, nil
}

// followReader stops the follower when closed.
type followReader struct {
	*io.PipeReader
	stop chan struct{}
	once sync.Once
}

func (f *followReader) Close() error {
	f.once.Do(func() { close(f.stop) })
	return f.PipeReader.Close()
}

// readComplete is jail.ReadLogs for a file being written: a last line
// without its newline is still being written and is left for the next
// read, so it is never sent cut short.
func readComplete(path string, since time.Time) ([]jail.LogRecord, error) {
	var out []jail.LogRecord
	for _, p := range []string{path + ".1", path} {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", p, err)
		}
		text := string(data)
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		} else {
			text = ""
		}
		for _, line := range strings.SplitAfter(text, "\n") {
			if line == "" {
				continue
			}
			rec, err := jail.ParseRecord(line)
			if err != nil {
				return nil, err
			}
			if !since.IsZero() && rec.Time.Before(since) {
				continue
			}
			out = append(out, rec)
		}
	}
	return out, nil
}
