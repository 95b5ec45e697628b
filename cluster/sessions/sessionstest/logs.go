package sessionstest

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/legionbsd/legion/jail"
)

// Logs stands in for a runtime's container logs: records appended per
// container id, read as jail.Runtime.Logs reads them (following new ones
// until ctx ends or the reader is closed).
type Logs struct {
	mu      sync.Mutex
	logs    map[string][]string
	removed map[string]bool // containers gone, read to their end by followers
	changed chan struct{}   // closed and replaced on every append
	readers int
	wg      sync.WaitGroup
}

// NewLogs makes an empty set of logs.
func NewLogs() *Logs { return &Logs{logs: map[string][]string{}, changed: make(chan struct{})} }

// Append adds records to a container's log, creating it.
func (l *Logs) Append(id string, recs ...jail.LogRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appendLocked(id, recs)
}

func (l *Logs) appendLocked(id string, recs []jail.LogRecord) {
	if l.logs[id] == nil {
		l.logs[id] = []string{}
	}
	for _, r := range recs {
		l.logs[id] = append(l.logs[id], jail.FormatRecord(r))
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// WriteAndRemove adds records to a container's log and removes the
// container at once, before any reader looks again (a job's task that
// says its line and ends): a follower that had read none of its log ends
// with jail.ErrNotFound, as jail.Keeper's does; one that had, at the end
// of what it wrote. New reads of it are jail.ErrNotFound.
func (l *Logs) WriteAndRemove(id string, recs ...jail.LogRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appendLocked(id, recs)
	if l.removed == nil {
		l.removed = map[string]bool{}
	}
	l.removed[id] = true
}

// Readers is how many readers are open: a session that ended closed its.
func (l *Logs) Readers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readers
}

// Read implements sessions.ReadLog.
func (l *Logs) Read(ctx context.Context, id string, opts jail.LogOptions) (io.ReadCloser, error) {
	l.mu.Lock()
	if l.logs[id] == nil || l.removed[id] {
		l.mu.Unlock()
		return nil, fmt.Errorf("container %s: %w", id, jail.ErrNotFound)
	}
	l.readers++
	l.mu.Unlock()
	pr, pw := io.Pipe()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			l.readers--
			l.mu.Unlock()
		}()
		pw.CloseWithError(l.write(ctx, id, opts, pw))
	}()
	return pr, nil
}

// Wait waits for every reader's writer to end.
func (l *Logs) Wait() { l.wg.Wait() }

func (l *Logs) write(ctx context.Context, id string, opts jail.LogOptions, w io.Writer) error {
	next := 0
	for {
		l.mu.Lock()
		lines := l.logs[id][next:]
		changed, removed := l.changed, l.removed[id]
		l.mu.Unlock()
		if removed && next == 0 {
			return fmt.Errorf("container %s, removed before its log was read: %w", id, jail.ErrNotFound)
		}
		for _, line := range lines {
			r, err := jail.ParseRecord(line)
			if err == nil && !opts.Since.IsZero() && r.Time.Before(opts.Since) {
				continue
			}
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		next += len(lines)
		if !opts.Follow || removed {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
