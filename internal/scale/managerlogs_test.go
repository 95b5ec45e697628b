package scale

import (
	"fmt"
	"log/slog"
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

// A phase's report counts the managers' warnings and errors in its
// window, a line for each manager and message, most first, with the
// first in full; information (other than Raft's about elections) and
// what came outside the window are left out.
func TestWarningsAreCountedByManagerAndMessage(t *testing.T) {
	t.Parallel()
	var logs managerLogs
	m0, m1 := slog.New(logs.handler(0)), slog.New(logs.handler(1))
	before := time.Now()
	m0.Warn("too early")
	start := time.Now()
	m1.Warn("assignment cache read the replica again", "from", 10, "to", 90)
	for i := range 3 {
		m0.Error("failed to appendEntries", "try", i)
	}
	m0.Info("node registered")
	m0.Info("entering leader state", "component", "raft")
	end := time.Now()
	name := func(i int) string { return fmt.Sprint("m", i) }
	got := logs.warningsBetween(start, end.Add(time.Nanosecond), name)
	if len(got) != 2 || !strings.HasPrefix(got[0], "3x m0, first at") || !strings.HasSuffix(got[0], "failed to appendEntries try=0") ||
		!strings.HasPrefix(got[1], "1x m1, first at") || !strings.HasSuffix(got[1], "assignment cache read the replica again from=10 to=90") {
		t.Fatalf("warnings from the phase's start:\n%s", strings.Join(got, "\n"))
	}
	if all := logs.warningsBetween(before, end.Add(time.Nanosecond), name); len(all) != 3 {
		t.Fatalf("warnings from before it: %q, want the early one too", all)
	}
	if e := logs.electionsSince(before, name); len(e) != 1 || !strings.HasSuffix(e[0], "m0: entering leader state") {
		t.Fatalf("election lines: %q", e)
	}
}

// Past its limit the harness keeps no more warnings, and a phase's
// report says its counts stop there rather than showing fewer.
func TestWarningsPastTheLimitAreSaidLost(t *testing.T) {
	t.Parallel()
	logs := managerLogs{limit: 3}
	m0 := slog.New(logs.handler(0))
	start := time.Now()
	for i := range 5 {
		m0.Warn("controller write failed", "n", i)
	}
	got := logs.warningsBetween(start, time.Now().Add(time.Nanosecond), func(int) string { return "m0" })
	if len(got) != 2 || !strings.HasPrefix(got[0], "3x m0") || !strings.Contains(got[1], "past the first 3 were not kept") {
		t.Fatalf("warnings past the limit:\n%s", strings.Join(got, "\n"))
	}
}
