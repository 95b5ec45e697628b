package main

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
)

// A removed manager's own Raft still lists the others, which refuse it
// and so look unreachable, and has no leader: read as the cluster's
// state, that is a frozen cluster, and status told how to start one
// again from this manager's store (a second cluster of removed data).
// Its status says it was removed instead, and nothing of its Raft.
func TestStatusOfARemovedManagerSaysSoAndNoRecovery(t *testing.T) {
	t.Parallel()
	st := client.Status{NodeID: "m3", Role: "manager", Initialized: true, State: "Candidate", Term: 9,
		Members: []client.Member{
			{ID: "m1", Address: "192.0.2.1:7470", Voter: true, Reachability: server.ReachUnreachable},
			{ID: "m2", Address: "192.0.2.2:7470", Voter: true, Reachability: server.ReachUnreachable},
			{ID: "m3", Address: "192.0.2.3:7470", Voter: true, Reachability: server.ReachReachable},
		}}
	var b strings.Builder
	printStatus(&b, st)
	if !strings.Contains(b.String(), "Recovery:") {
		t.Fatalf("the same status, not removed, is a frozen cluster's; this test shows nothing:\n%s", b.String())
	}

	st.Removed = true
	b.Reset()
	printStatus(&b, st)
	out := b.String()
	if !strings.HasPrefix(out, "Node:      m3 (manager)\nRemoved:   this manager was taken out of the cluster") ||
		!strings.Contains(out, "legion join") {
		t.Errorf("a removed manager's status does not say so:\n%s", out)
	}
	for _, line := range []string{"State:", "Leader:", "Recovery:", "Tolerates:", "Managers:"} {
		if strings.Contains(out, line) {
			t.Errorf("a removed manager's status has a %s line, its own Raft's word:\n%s", line, out)
		}
	}
	json, errOut := render(t, statusListing(st), "json")
	if !strings.Contains(json, `"removed": true`) || errOut != "" {
		t.Errorf("status -o json of a removed manager:\n%s%s", json, errOut)
	}
}
