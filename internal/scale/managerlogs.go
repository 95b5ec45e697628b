package scale

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// electionWords pick Raft's lines about elections out of the managers'
// logs: standing, pre-votes and votes, their refusals, and who leads.
var electionWords = []string{"election", "vote", "candidate", "entering ", "leader"}

// maxManagerLines bounds what managerLogs keeps of each sort over a run
// (a killed leader's failed writes are hundreds of warnings).
const maxManagerLines = 100000

// managerLogs keeps two things of the managers' logs. Raft's lines about
// elections (the store passes raft's information at debug level), so a
// leader kill's report can say how the next leader came to be: at
// production timing an election takes 5 to 10 s, and one beyond that was
// two split or turned-away votes, or a machine too busy to send them.
// And every warning and error, so a phase's report can say what went
// wrong on the managers during it (a cache that fell behind and read its
// replica again, say), not only how long the phase took.
type managerLogs struct {
	mu                  sync.Mutex
	elections, warnings []managerLine
	// lostSince is when the first warning not kept came (zero: none).
	lostSince time.Time
	limit     int // of each sort; zero is maxManagerLines
}

func (e *managerLogs) max() int {
	if e.limit > 0 {
		return e.limit
	}
	return maxManagerLines
}

type managerLine struct {
	at      time.Time
	manager int
	text    string // the message, then each attribute as key=value
	msg     string // the message alone
}

// handler is manager i's log handler.
func (e *managerLogs) handler(i int) slog.Handler { return managerHandler{e, i} }

// electionsSince is the election lines from t on, each with its time
// after t and the name of its manager (name(i)).
func (e *managerLogs) electionsSince(t time.Time, name func(i int) string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range e.elections {
		if !l.at.Before(t) {
			out = append(out, fmt.Sprintf("+%6.3fs %s: %s", l.at.Sub(t).Seconds(), name(l.manager), l.text))
		}
	}
	return out
}

// warningsBetween is the warnings and errors logged from t up to end,
// one line for each manager and message with how many times it came,
// most first, and the first of them in full.
func (e *managerLogs) warningsBetween(t, end time.Time, name func(i int) string) []string {
	type key struct {
		manager int
		msg     string
	}
	counts := map[key]int{}
	first := map[key]managerLine{}
	e.mu.Lock()
	for _, l := range e.warnings {
		if l.at.Before(t) || !l.at.Before(end) {
			continue
		}
		k := key{l.manager, l.msg}
		if counts[k] == 0 {
			first[k] = l
		}
		counts[k]++
	}
	lost := !e.lostSince.IsZero() && e.lostSince.Before(end)
	e.mu.Unlock()
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), first[a].at.Compare(first[b].at))
	})
	out := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		l := first[k]
		out = append(out, fmt.Sprintf("%dx %s, first at +%.3fs: %s", counts[k], name(k.manager), l.at.Sub(t).Seconds(), l.text))
	}
	if lost {
		out = append(out, fmt.Sprintf("(the run's warnings past the first %d were not kept: these counts stop there)", e.max()))
	}
	return out
}

type managerHandler struct {
	e       *managerLogs
	manager int
}

func (h managerHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h managerHandler) Handle(_ context.Context, r slog.Record) error {
	warning, election := r.Level >= slog.LevelWarn, aboutElections(r.Message)
	if !warning && !election {
		return nil
	}
	raft := false
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" {
			if raft = a.Value.String() == "raft"; raft {
				return true // every election line is raft's
			}
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l := managerLine{r.Time, h.manager, b.String(), r.Message}
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	switch {
	case warning && len(h.e.warnings) < h.e.max():
		h.e.warnings = append(h.e.warnings, l)
	case warning && h.e.lostSince.IsZero():
		h.e.lostSince = r.Time
	}
	if raft && election && len(h.e.elections) < h.e.max() {
		h.e.elections = append(h.e.elections, l)
	}
	return nil
}

func (h managerHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h managerHandler) WithGroup(string) slog.Handler      { return h }

func aboutElections(msg string) bool {
	msg = strings.ToLower(msg)
	for _, w := range electionWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
