// Package logtest is a sink for tests that check what the code under
// test logged or printed: safe to write from that code's goroutines
// while the test reads.
package logtest

import (
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects what is written to it.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger logs text lines into the buffer, from level Info up.
func (l *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, nil))
}

// Count is how many lines logged with the message msg (as Logger writes
// them).
func (l *Buffer) Count(msg string) int {
	return strings.Count(l.String(), `msg="`+msg+`"`)
}
