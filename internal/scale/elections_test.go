package scale

import (
	"strings"
	"testing"
	"time"
)

// The harness keeps what the managers' Raft said about elections, which
// a leader kill's report prints: a manager that starts alone elects
// itself, and that is told with the manager's address.
func TestElectionsTellHowTheLeaderCame(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	h := New(t, Options{Managers: 1, Agents: 1})
	addr := h.Cluster.Managers[0].Addr
	lines := h.Elections(t0)
	for _, l := range lines {
		if strings.Contains(l, addr+": entering leader state") {
			return
		}
	}
	t.Fatalf("no line says %s entered the leader state; the lines:\n%s", addr, strings.Join(lines, "\n"))
}
