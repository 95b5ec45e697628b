package scale

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// electionWords pick Raft's lines about elections out of the managers'
// logs: standing, pre-votes and votes, their refusals, and who leads.
var electionWords = []string{"election", "vote", "candidate", "entering ", "leader"}

// maxElectionLines bounds what elections keeps over a run.
const maxElectionLines = 10000

// elections keeps the managers' Raft lines about elections (the store
// passes raft's information at debug level), so a leader kill's report
// can say how the next leader came to be: at production timing an
// election takes 5 to 10 s, and one beyond that was two split or
// turned-away votes, or a machine too busy to send them.
type elections struct {
	mu    sync.Mutex
	lines []electionLine
}

type electionLine struct {
	at      time.Time
	manager int
	text    string
}

// handler is manager i's log handler.
func (e *elections) handler(i int) slog.Handler { return electionHandler{e, i} }

// since is the lines from t on, each with its time after t and the name
// of its manager (name(i)).
func (e *elections) since(t time.Time, name func(i int) string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range e.lines {
		if !l.at.Before(t) {
			out = append(out, fmt.Sprintf("+%6.3fs %s: %s", l.at.Sub(t).Seconds(), name(l.manager), l.text))
		}
	}
	return out
}

type electionHandler struct {
	e       *elections
	manager int
}

func (h electionHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h electionHandler) Handle(_ context.Context, r slog.Record) error {
	if !aboutElections(r.Message) {
		return nil
	}
	raft := false
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" {
			raft = a.Value.String() == "raft"
			return true
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	if !raft {
		return nil
	}
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	if len(h.e.lines) < maxElectionLines {
		h.e.lines = append(h.e.lines, electionLine{r.Time, h.manager, b.String()})
	}
	return nil
}

func (h electionHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h electionHandler) WithGroup(string) slog.Handler      { return h }

func aboutElections(msg string) bool {
	msg = strings.ToLower(msg)
	for _, w := range electionWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
