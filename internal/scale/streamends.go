package scale

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
)

// streamEnds counts why the agents' assignment streams ended: every end
// costs a whole set on the next stream, which at 20,000 tasks is
// megabytes per agent.
type streamEnds struct {
	mu     sync.Mutex
	counts map[string]int
}

// take reads the counts since the last take, most frequent first, as
// "N reason" lines.
func (s *streamEnds) take() []string {
	s.mu.Lock()
	counts := s.counts
	s.counts = nil
	s.mu.Unlock()
	reasons := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return counts[b] - counts[a] })
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = fmt.Sprintf("%d %s", counts[r], r)
	}
	return out
}

// addrs and numbers vary from end to end; the reason does not.
var variable = regexp.MustCompile(`[0-9]+(\.[0-9]+){3}(:[0-9]+)?|:[0-9]+|[0-9]+`)

// add counts one end, for dispatcherclient.Config.OnStreamEnd.
func (s *streamEnds) add(err error) {
	reason := "<nil>"
	if err != nil {
		reason = variable.ReplaceAllString(err.Error(), "N")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[reason]++
}
