package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A manager the admin demoted does not ask to vote again after a
// restart; one whose join never finished does.
func TestDemotedManagerStaysDemotedAcrossRestarts(t *testing.T) {
	t.Parallel()
	m, n, admin := joinedPair(t, "manager")
	defer m.stop()
	defer n.stop()
	voted := filepath.Join(n.dir, votedFile)
	if _, err := os.Stat(voted); err != nil {
		t.Fatalf("a manager whose join returned is not marked as having voted: %v", err)
	}
	if changed, err := admin.SetVoter(context.Background(), n.s.NodeID(), false); err != nil || !changed {
		t.Fatalf("demoting: changed=%v %v", changed, err)
	}
	// The demotion commits on the leader alone (the only voter left):
	// the restart below must find it in n's own log.
	waitFor(t, "the demoted manager to hold its demotion", 10*time.Second, func() bool {
		c, _, err := raftConfig(n.s.Store())
		if err != nil {
			return false
		}
		me, ok := findServer(c, n.s.NodeID())
		return ok && me.Suffrage != raft.Voter
	})
	n.stop()
	n.restart()
	if n.s.unfinishedJoin(n.s.Store()) {
		t.Fatal("the demoted manager would ask to vote again after its restart")
	}
	// Without the mark it is a join to finish.
	if err := os.Remove(voted); err != nil {
		t.Fatal(err)
	}
	if !n.s.unfinishedJoin(n.s.Store()) {
		t.Fatal("a non-voter that never voted is not seen as a join to finish")
	}
}

// A join that cannot finish says what it was waiting for.
func TestUnfinishedJoinSaysWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	m, n, _ := joinedPair(t, "manager")
	defer n.stop()
	addr := m.addr
	m.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := n.s.becomeVoter(ctx, addr)
	if err == nil || !strings.Contains(err.Error(), "waiting for the leader to add it to Raft") || !strings.Contains(err.Error(), "last answer") {
		t.Fatalf("becomeVoter with the leader gone: %v, want it to name what it waited for and the last answer", err)
	}
}

// A join that reaches a manager during an election asks again, and
// finishes once a leader is back, rather than fail at the first answer.
func TestJoinWaitsOutAnElection(t *testing.T) {
	t.Parallel()
	m, n, admin := joinedPair(t, "manager")
	defer m.stop()
	defer n.stop()
	tok, err := admin.Token(context.Background(), "manager")
	if err != nil {
		t.Fatal(err)
	}
	n.stop()
	// Alone of two voters, m steps down: a join now finds no leader.
	waitFor(t, "the manager left alone to step down", 10*time.Second, func() bool { return !m.s.Store().IsLeader() })
	x := newManager(t)
	defer x.stop()
	xc := x.bare()
	done := make(chan error, 1)
	go func() {
		_, err := xc.JoinCluster(context.Background(), tok, m.addr, "manager")
		done <- err
	}()
	n.restart()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a join during an election: %v", err)
		}
	case <-time.After(joinVoterWait):
		t.Fatal("the join never returned")
	}
	if !x.s.isVoter(x.s.Store()) {
		t.Fatal("the join returned before the manager votes")
	}
}
