package scale

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testcluster"
)

// The harness keeps what the managers' Raft said about elections, which
// a leader kill's report prints: a manager that starts alone elects
// itself, and that is told with the manager's address. (Raft may report
// itself leader a moment before it logs so: the line is waited for.)
func TestElectionsTellHowTheLeaderCame(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	h := New(t, Options{Managers: 1, Agents: 1})
	addr := h.Cluster.Managers[0].Addr
	var lines []string
	told := func() bool {
		lines = h.Elections(t0)
		for _, l := range lines {
			if strings.Contains(l, addr+": entering leader state") {
				return true
			}
		}
		return false
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the lines kept:\n%s", strings.Join(lines, "\n"))
		}
	})
	testcluster.WaitFor(t, "a line saying "+addr+" entered the leader state", 10*time.Second, told)
}
