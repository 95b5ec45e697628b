package scale

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// streamEnds counts why the agents' assignment streams ended, from what
// their sessions log: every end costs a whole set on the next stream,
// which at 20,000 tasks is megabytes per agent.
type streamEnds struct {
	mu     sync.Mutex
	counts map[string]int
}

// take reads the counts since the last take, most frequent first, as
// "N reason" lines.
func (s *streamEnds) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.counts {
		out = append(out, fmt.Sprintf("%d %s", n, k))
	}
	s.counts = nil
	slices.SortFunc(out, func(a, b string) int {
		var na, nb int
		fmt.Sscan(a, &na)
		fmt.Sscan(b, &nb)
		return nb - na
	})
	return out
}

// The messages of dispatcherclient that say a stream ended or was left.
var endMessages = []string{"assignments stream ended", "manager did not answer in time"}

// addrs and numbers vary from end to end; the reason does not.
var variable = regexp.MustCompile(`[0-9]+(\.[0-9]+){3}(:[0-9]+)?|:[0-9]+|[0-9]+`)

func (s *streamEnds) handler() slog.Handler { return endHandler{s} }

type endHandler struct{ s *streamEnds }

func (h endHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h endHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h endHandler) WithGroup(string) slog.Handler            { return h }

func (h endHandler) Handle(_ context.Context, r slog.Record) error {
	if !slices.ContainsFunc(endMessages, func(m string) bool { return strings.HasPrefix(r.Message, m) }) {
		return nil
	}
	reason := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			reason += ": " + variable.ReplaceAllString(a.Value.String(), "N")
		}
		return true
	})
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.counts == nil {
		h.s.counts = map[string]int{}
	}
	h.s.counts[reason]++
	return nil
}
