package lab_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/lab"
	"github.com/legionbsd/legion/scheduler"
)

// A flapping link, 30 % loss and 200 ms delay each way on a follower
// manager and on the worker, on the production Raft timing: no election
// storm (at most one new term while it lasts), and the worker, whose
// heartbeats still arrive within the limits, is never declared down.
// Where the kernel has no netem, the link loses packets but is not
// delayed.
func flappingLink(t *testing.T) {
	netemErr := lab.NetemAvailable()
	l := lab.New(t, lab.Options{Managers: 3, Workers: 1, RaftTiming: "default"})
	leader, before, err := l.Leader()
	if err != nil {
		t.Fatal(err)
	}
	var follower *lab.Node
	for _, m := range l.Managers() {
		if m != leader {
			follower = m
			break
		}
	}
	w := l.Workers()[0]
	const delay, loss = 200 * time.Millisecond, 30
	// Without netem the link still loses packets, through iptables, but
	// is not slowed: the test says so and checks what it can.
	flap, clear := func(n *lab.Node) error { return l.Netem(n, delay, loss) }, func(n *lab.Node) error { return l.ClearNetem(n) }
	how := fmt.Sprintf("%v delay and %d%% loss", delay, loss)
	if netemErr != nil {
		flap, clear = func(n *lab.Node) error { return l.Loss(n, loss) }, func(n *lab.Node) error { return l.ClearLoss(n, loss) }
		how = fmt.Sprintf("%d%% loss and no delay (%v)", loss, netemErr)
	}
	for _, n := range []*lab.Node{follower, w} {
		if err := flap(n); errors.Is(err, lab.ErrNoLoss) {
			t.Skipf("neither delay nor loss here: %v; %v", netemErr, err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// Long enough for a node to go down, were its heartbeats lost.
	window := time.Duration(scheduler.DownAfter+1) * legion.HeartbeatPeriod
	start := time.Now()
	states := map[legion.NodeState]int{}
	terms := map[uint64]bool{before.Term: true}
	sample := time.NewTicker(500 * time.Millisecond)
	defer sample.Stop()
	for range sample.C {
		if time.Since(start) > window {
			break
		}
		if st, err := l.NodeStates(leader); err == nil {
			states[st[w.ID]]++
		}
		for _, m := range l.Managers() {
			if st, err := l.Status(m); err == nil {
				terms[st.Term] = true
			}
		}
	}
	for _, n := range []*lab.Node{follower, w} {
		if err := clear(n); err != nil {
			t.Error(err)
		}
	}
	_, after, err := l.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if after.Term > before.Term+1 {
		t.Errorf("term %d before the flapping, %d after (%d terms seen): an election storm", before.Term, after.Term, len(terms))
	}
	if states[legion.NodeDown] > 0 {
		t.Errorf("%s declared down while its heartbeats arrived late or lost in part: samples %v", w.Name, states)
	}
	t.Logf("flapping link (%s) on %s and %s for %v: terms %d -> %d (%d elections), worker state samples %v",
		how, follower.Name, w.Name, window, before.Term, after.Term, after.Term-before.Term, states)
}
