package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

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
	sid := stopped.Server.NodeID()
	stopped.Stop()
	row := func(id, reach string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s+` + id + `\s+\S+\s+` + reach + `\s+voter$`)
	}
	var out string
	testcluster.WaitFor(t, "status to show the stopped manager unreachable", 10*time.Second, func() bool {
		var err error
		out, err = cli("status")
		return err == nil && row(leader.Server.NodeID(), "Leader").MatchString(out) &&
			row(fid, "Reachable").MatchString(out) && row(sid, "Unreachable").MatchString(out)
	})
	if !strings.Contains(out, "STATUS") {
		t.Fatalf("status lacks its table's header:\n%s", out)
	}
}
