package testcluster

import (
	"strings"
	"testing"
)

// Of a process's stacks, only agent workers waiting minutes are picked:
// not a worker that waited seconds, nor other code waiting minutes.
func TestStuckWorkersPicksWorkersWaitingMinutes(t *testing.T) {
	const (
		stuck = `goroutine 41 [select, 2 minutes]:
github.com/legionbsd/legion/jail/process.(*Runtime).Start(...)
github.com/legionbsd/legion/internal/agent.(*worker).start(0xc0001)`
		recent = `goroutine 42 [select]:
github.com/legionbsd/legion/internal/agent.(*worker).start(0xc0002)`
		other = `goroutine 43 [chan receive, 5 minutes]:
github.com/legionbsd/legion/cluster/server.(*Server).watchFrozen(0xc0003)`
	)
	got := stuckWorkers(strings.Join([]string{recent, stuck, other}, "\n\n") + "\n")
	if got != stuck {
		t.Fatalf("picked:\n%s\nwant only:\n%s", got, stuck)
	}
	if got := stuckWorkers(recent + "\n\n" + other); got != "" {
		t.Fatalf("picked from stacks with no stuck worker:\n%s", got)
	}
	// The real stacks of this process parse: this test's own goroutine
	// is among them, and none is an agent's worker.
	if all := allStacks(); !strings.Contains(all, "TestStuckWorkersPicksWorkersWaitingMinutes") || stuckWorkers(all) != "" {
		t.Fatalf("this process's stacks: %d bytes, stuck workers %q", len(all), stuckWorkers(all))
	}
}
