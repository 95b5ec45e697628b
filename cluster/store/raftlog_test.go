package store

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// records keeps the log records a handler receives.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// Raft's log lines reach slog at their own levels with their fields,
// not all as warnings with the level in the text; an election at start
// is no warning, raft's information is debug, and raft's debug chatter
// stays out.
func TestRaftLogLevelsMapToSlog(t *testing.T) {
	t.Parallel()
	h := &records{}
	l := raftLogger(slog.New(h))
	l.Error("failed to appendEntries to", "peer", "m2")
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "")
	l.Warn("rejecting vote request")
	l.Info("entering follower state")
	l.Debug("accepted connection")
	want := []struct {
		level slog.Level
		msg   string
	}{{slog.LevelError, "failed to appendEntries to"}, {slog.LevelInfo, "heartbeat timeout reached, starting election"}, {slog.LevelWarn, "rejecting vote request"},
		{slog.LevelDebug, "entering follower state"}}
	if len(h.got) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(h.got), len(want), h.got)
	}
	for i, w := range want {
		if r := h.got[i]; r.Level != w.level || r.Message != w.msg {
			t.Errorf("record %d: %v %q, want %v %q", i, r.Level, r.Message, w.level, w.msg)
		}
	}
	peer := ""
	h.got[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "peer" {
			peer = a.Value.String()
		}
		return true
	})
	if peer != "m2" {
		t.Errorf("raft's fields are not attributes: peer %q", peer)
	}
}
