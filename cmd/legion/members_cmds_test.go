package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// legion node demote and promote change a manager's vote, and legion
// status lists each manager with its reachability and vote, a stopped
// one Unreachable.
func TestNodePromoteDemoteAndStatus(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	leader := c.WaitLeader()
	fs := c.Followers(leader)
	follower, stopped := fs[0], fs[1]
	flags := []string{"--server", leader.Addr, "--credentials", c.AdminFile()}
	cli := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	fid := follower.Server.NodeID()
	if out, err := cli("node", "demote", fid); err != nil || out != "node/"+fid+" demoted\n" {
		t.Fatalf("node demote: %q %v", out, err)
	}
	if out, err := cli("node", "demote", fid); err != nil || out != "node/"+fid+" unchanged: not a voter already\n" {
		t.Fatalf("node demote again: %q %v", out, err)
	}
	if _, err := cli("node", "promote", "no-such-node"); err == nil || !strings.Contains(err.Error(), "no such manager") {
		t.Fatalf("node promote of an unknown node: %v", err)
	}
	if out, err := cli("node", "promote", fid); err != nil || out != "node/"+fid+" promoted\n" {
		t.Fatalf("node promote: %q %v", out, err)
	}
	// These managers run no agent: node ls, which lists Nodes, says why
	// it leaves them out, where docker node ls lists every manager.
	out, err := cli("node", "ls")
	if err != nil || !strings.HasPrefix(out, "No nodes found.\nManagers ") ||
		!strings.Contains(out, " are not listed: they have no node, as a manager run with no agent (legion daemon --no-agent) runs no tasks") {
		t.Errorf("node ls of managers with no agent: %v\n%s", err, out)
	}
	for _, m := range c.Managers {
		if !strings.Contains(out, m.Server.NodeID()) {
			t.Errorf("node ls does not name manager %s:\n%s", m.Server.NodeID(), out)
		}
	}
	sid := stopped.Server.NodeID()
	stopped.Stop()
	row := func(id, reach string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s+` + id + `\s+\S+\s+` + reach + `\s+voter$`)
	}
	testcluster.WaitFor(t, "status to show the stopped manager unreachable", 10*time.Second, func() bool {
		out, err = cli("status")
		return err == nil && row(leader.Server.NodeID(), "Leader").MatchString(out) &&
			row(fid, "Reachable").MatchString(out) && row(sid, "Unreachable").MatchString(out)
	})
	if !strings.Contains(out, "STATUS") {
		t.Fatalf("status lacks its table's header:\n%s", out)
	}
	// A stopped voter still counts: it is what the majority is of.
	if !strings.Contains(out, "Tolerates: the loss of 1 of its 3 voting managers") {
		t.Errorf("status does not say how many managers the cluster may lose:\n%s", out)
	}
	if strings.Contains(out, "Recovery:") {
		t.Errorf("status of a cluster with a leader tells how to recover it:\n%s", out)
	}

	// With the leader gone too, the one left says the cluster is frozen
	// and how to start it again from itself if the others never return.
	leader.Stop()
	testcluster.WaitFor(t, "the lone manager's status to say the cluster is frozen", 20*time.Second, func() bool {
		out, err = runLegion(t, "", "status", "--server", follower.Addr, "--credentials", c.AdminFile())
		return err == nil && strings.Contains(out, "Leader:    none: 1 of the 3 voting managers answer")
	})
	if !strings.Contains(out, "\nRecovery:  if they are gone for good, stop this manager's daemon, run legion restore --data-dir DIR") {
		t.Errorf("a frozen cluster's status does not say how to start it again:\n%s", out)
	}
}

// status says how many managers the cluster may lose, counting voters
// alone, and what an even count costs.
func TestFaultTolerance(t *testing.T) {
	t.Parallel()
	members := func(voters, learners int) []client.Member {
		var ms []client.Member
		for i := range voters + learners {
			ms = append(ms, client.Member{ID: fmt.Sprint(i), Voter: i < voters})
		}
		return ms
	}
	for _, tc := range []struct {
		voters, learners int
		want             string
	}{
		{0, 0, ""},
		{1, 1, "no loss of its one manager (three tolerate the loss of one)"},
		{2, 0, "no loss of either of its two managers, so two are less available than one (either's loss stops the cluster); add a third"},
		{3, 1, "the loss of 1 of its 3 voting managers (a majority, 2, keeps it working)"},
		{4, 0, "the loss of 1 of its 4 voting managers (a majority, 3, keeps it working): 3 would tolerate as many; add one for the loss of 2"},
		{5, 0, "the loss of 2 of its 5 voting managers (a majority, 3, keeps it working)"},
	} {
		if got := faultTolerance(members(tc.voters, tc.learners)); got != tc.want {
			t.Errorf("%d voters, %d learners: %q, want %q", tc.voters, tc.learners, got, tc.want)
		}
	}
}

// A status with no leader says whether an election can end it.
func TestNoLeaderWhy(t *testing.T) {
	t.Parallel()
	m := func(voter bool, reach string) client.Member { return client.Member{Voter: voter, Reachability: reach} }
	for _, tc := range []struct {
		members []client.Member
		want    string
	}{
		{[]client.Member{m(true, "Reachable")}, "an election is in progress"},
		{[]client.Member{m(true, "Reachable"), m(true, "Reachable"), m(true, "Unreachable")}, "an election is in progress"},
		{[]client.Member{m(true, "Reachable"), m(true, "Unreachable")},
			"1 of the 2 voting managers answer, and electing one takes 2: the cluster is frozen until more are back"},
		{[]client.Member{m(true, "Reachable"), m(true, "Unreachable"), m(true, "Unreachable"), m(false, "Reachable")},
			"1 of the 3 voting managers answer, and electing one takes 2: the cluster is frozen until more are back"},
	} {
		if got := noLeaderWhy(tc.members); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.members, got, tc.want)
		}
	}
}
