package testcluster

import (
	"strings"
	"testing"
)

// Of a process's stacks, only agent workers making or taking down a pod
// are picked: not a running pod's probes or worker, nor other code, however
// long they waited.
func TestStuckWorkersPicksWorkersMakingOrTakingDownPods(t *testing.T) {
	const (
		stuck = `goroutine 41 [select, 2 minutes]:
github.com/legionbsd/legion/jail/process.(*Runtime).Create(...)
github.com/legionbsd/legion/internal/agent.(*worker).prepare(0xc0001, {0x15ba0c0, 0xc0002})`
		down = `goroutine 42 [select]:
github.com/legionbsd/legion/internal/agent.(*worker).teardown(0xc0002, {0x15ba0c0, 0xc0002}, {0x1, 0x2}, {0x3, 0x4})`
		running = `goroutine 45 [select, 4 minutes]:
github.com/legionbsd/legion/internal/agent.(*worker).supervise(0xc0004, {0x15ba0c0, 0xc0002})`
		probes = `goroutine 44 [sync.WaitGroup.Wait, 3 minutes]:
github.com/legionbsd/legion/internal/agent/probe.(*Prober).Run(0x3e29607eacf0, {0x15ba0c0, 0x3e2961d24e60})
github.com/legionbsd/legion/internal/agent.(*worker).startProbes.func2()
created by github.com/legionbsd/legion/internal/agent.(*worker).startProbes in goroutine 20440`
		other = `goroutine 43 [chan receive, 5 minutes]:
github.com/legionbsd/legion/cluster/server.(*Server).watchFrozen(0xc0003)`
	)
	got := stuckWorkers(strings.Join([]string{running, stuck, probes, down, other}, "\n\n") + "\n")
	if want := stuck + "\n\n" + down; got != want {
		t.Fatalf("picked:\n%s\nwant only:\n%s", got, want)
	}
	if got := stuckWorkers(running + "\n\n" + probes + "\n\n" + other); got != "" {
		t.Fatalf("picked from stacks with no stuck worker:\n%s", got)
	}
	// The real stacks of this process parse: this test's own goroutine
	// is among them, and none is an agent's worker.
	if all := allStacks(); !strings.Contains(all, "TestStuckWorkersPicksWorkersMakingOrTakingDownPods") || stuckWorkers(all) != "" {
		t.Fatalf("this process's stacks: %d bytes, stuck workers %q", len(all), stuckWorkers(all))
	}
}
