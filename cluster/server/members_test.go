package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// failoverBound is how soon, after the leader dies, the cluster must
// have a new leader that accepts a write.
const failoverBound = 10 * time.Second

func config(name string) legion.Object {
	o, _ := legion.New(legion.KindConfig)
	c := o.(*legion.Config)
	c.Metadata.Name, c.Metadata.Namespace = name, legion.DefaultNamespace
	c.Spec.Data = []byte(name)
	return c
}

// suffrage is what st's Raft configuration says of node: whether it is a
// member, and a voter.
func suffrage(t *testing.T, st *store.Store, node string) (member, voter bool) {
	t.Helper()
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Configuration().Servers {
		if string(m.ID) == node {
			return true, m.Suffrage == raft.Voter
		}
	}
	return false, false
}

// adminOf is a client with the admin's credentials to addr, retrying
// UNAVAILABLE for retry.
func adminOf(t *testing.T, addr, credentials string, retry time.Duration) *client.Client {
	t.Helper()
	cl, err := client.New(client.Options{Server: addr, CredentialsFile: credentials, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// applyLooking applies o as a client told a write's outcome is unknown
// should: it looks whether the write applied before making it again.
func applyLooking(ctx context.Context, cl *client.Client, o legion.Object) error {
	m := o.GetMetadata()
	for {
		_, err := cl.ApplyOne(ctx, o, client.ApplyOptions{})
		if !errors.Is(err, client.ErrOutcomeUnknown) {
			return err
		}
		if _, gerr := cl.Get(ctx, o.GetKind(), m.Namespace, m.Name); gerr == nil {
			return nil // it applied
		} else if !errors.Is(gerr, client.ErrNotFound) {
			return fmt.Errorf("%w; then, looking: %w", err, gerr)
		}
	}
}

// A join of a manager returns once it votes, so a leader killed at once
// after two joins leaves a quorum: twenty runs in a row elect a new leader
// that accepts a write within 10 s.
func TestLeaderKilledRightAfterTwoJoinsLeavesAQuorum(t *testing.T) {
	t.Parallel()
	for run := range 20 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			ms := []*testcluster.Manager{}
			for range 3 {
				ms = append(ms, testcluster.StartManager(t, t.TempDir(), testaddr.Loopback(t), nil))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			first := ms[0]
			if _, err := first.Bare().Init(ctx); err != nil {
				t.Fatal(err)
			}
			admin := filepath.Join(first.Dir, server.AdminFile)
			tok, err := adminOf(t, first.Addr, admin, time.Second).Token(ctx, "manager")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms[1:] {
				if _, err := m.Bare().JoinCluster(ctx, tok, first.Addr, "manager"); err != nil {
					t.Fatalf("joining %s: %v", m.Addr, err)
				}
				// Returned: it votes, as far as it knows itself.
				if member, voter := suffrage(t, m.Store(), m.Server.NodeID()); !member || !voter {
					t.Fatalf("join of %s returned with it member=%v voter=%v", m.Addr, member, voter)
				}
			}
			killed := time.Now()
			first.Kill()
			wctx, wcancel := context.WithDeadline(ctx, killed.Add(failoverBound))
			defer wcancel()
			cl := adminOf(t, ms[1].Addr, admin, failoverBound)
			if err := applyLooking(wctx, cl, config("after-kill")); err != nil {
				t.Fatalf("no write accepted within %s of the leader's death: %v", failoverBound, err)
			}
			t.Logf("a write accepted %s after the kill", time.Since(killed).Round(time.Millisecond))
		})
	}
}

// waitRefusedAsRemoved waits up to d for the removed manager m, reached
// directly by the admin, to refuse the API saying it was removed, and for
// its status, which it still answers, to say so; the leader's does not.
// (A call m forwards is refused by the leader as soon as the removal is
// committed; m itself learns it when the entry reaches it or, when the
// leader stopped sending before it did, from the refusal of its next
// election.)
func waitRefusedAsRemoved(ctx context.Context, t *testing.T, c *testcluster.Cluster, m *testcluster.Manager, what string, d time.Duration) {
	t.Helper()
	direct := adminOf(t, m.Addr, c.AdminFile(), -1)
	testcluster.WaitFor(t, what+" to refuse the API", d, func() bool {
		_, _, err := direct.List(ctx, legion.KindConfig, client.ListOptions{})
		return client.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "was removed from the cluster")
	})
	testcluster.WaitFor(t, what+"'s status to say it was removed", d, func() bool {
		st, err := direct.Status(ctx)
		return err == nil && st.Removed
	})
	if st, err := c.ClientTo(c.WaitLeader()).Status(ctx); err != nil || st.Removed {
		t.Errorf("the leader's status: removed %v (%v)", st.Removed, err)
	}
}

// A manager whose Node is deleted, the leader here, leaves Raft first
// (leadership moves away, the client's retry finishes the delete): it
// votes no more, its certificate can neither read nor write nor make
// Raft calls, and it serves nothing though its process still runs.
func TestRemovedManagerCanNeitherReadWriteNorVote(t *testing.T) {
	t.Parallel()
	c, logs := warnLogged(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	victim := c.WaitLeader()
	id := victim.Server.NodeID()
	var rest []*testcluster.Manager
	for _, m := range c.Managers {
		if m != victim {
			rest = append(rest, m)
		}
	}
	creds := victim.Server.Credentials()
	// Its agent registered its Node, as legion daemon's does.
	if err := register(ctx, nodeConn(t, victim.Addr, creds)); err != nil {
		t.Fatalf("registering the manager's Node: %v", err)
	}
	if _, err := c.ClientTo(rest[0]).Delete(ctx, legion.KindNode, "", id, nil); err != nil {
		t.Fatalf("deleting the Node of manager %s: %v", id, err)
	}
	for _, m := range rest {
		testcluster.WaitFor(t, "the removal to reach "+m.Addr, 5*time.Second, func() bool {
			member, _ := suffrage(t, m.Store(), id)
			return !member
		})
	}
	if victim.Server == nil || victim.Store() == nil {
		t.Fatal("the removed manager is meant to keep running")
	}
	if _, err := c.ClientTo(rest[0]).Get(ctx, legion.KindNode, "", id); client.Code(err) != codes.NotFound {
		t.Fatalf("the Node after the delete: %v, want NOT_FOUND", err)
	}
	conn := nodeConn(t, rest[1].Addr, creds)
	_, err := pb.NewObjectsClient(conn).List(ctx, &pb.ListRequest{Kind: string(legion.KindConfig)})
	refusedAsRemoved(t, "a read with the removed manager's certificate", err)
	_, err = pb.NewObjectsClient(conn).Delete(ctx, &pb.DeleteRequest{Kind: string(legion.KindConfig), Namespace: legion.DefaultNamespace, Name: "any"})
	refusedAsRemoved(t, "a write with the removed manager's certificate", err)
	_, err = pb.NewRaftClient(conn).RequestVote(ctx, &pb.RaftMessage{Payload: []byte(`{"Term": 1000}`)})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a vote request from the removed manager: %v, want PERMISSION_DENIED", err)
	}
	if term := rest[1].Store().Raft().CurrentTerm(); term >= 1000 {
		t.Errorf("the refused vote request moved the term to %d", term)
	}
	// Nor can it pass on a node's heartbeat or report to the leader, as a
	// follower does: the leader takes a relaying manager's word only while
	// its certificate holds.
	relay := metadata.AppendToOutgoingContext(ctx, pb.ForwardedKey, id)
	disp := pb.NewDispatcherClient(nodeConn(t, c.WaitLeader().Addr, creds))
	_, err = disp.Heartbeat(relay, &pb.HeartbeatRequest{Node: rest[0].Server.NodeID()})
	refusedAsRemoved(t, "a heartbeat relayed by the removed manager", err)
	_, err = disp.Report(relay, &pb.ReportRequest{Node: rest[0].Server.NodeID(), Namespace: legion.DefaultNamespace, Name: "any",
		Status: []byte(`{"state":"failed"}`)})
	refusedAsRemoved(t, "a report relayed by the removed manager", err)
	// Reached directly, it serves nothing: its own replica no longer
	// lists it.
	waitRefusedAsRemoved(ctx, t, c, victim, "the removed manager", 5*time.Second)
	// The two left make a quorum of their own.
	if _, err := c.ClientTo(rest[1]).ApplyOne(ctx, config("after-removal"), client.ApplyOptions{}); err != nil {
		t.Fatalf("a write after the removal: %v", err)
	}
	saysRemovedOnce(t, logs[slices.Index(c.Managers, victim)], id)
}

// A manager removed while it was down never gets the entry that removes
// it: the others no longer send it anything. Started again, it learns
// its removal from the other managers' refusal of its election, and
// serves nothing, as one removed while running does.
func TestManagerRemovedWhileDownLearnsItWhenItReturns(t *testing.T) {
	t.Parallel()
	c, logs := warnLogged(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.WaitLeader()
	victim := c.Followers(leader)[0]
	id := victim.Server.NodeID()
	// Its agent registered its Node (agents register with the leader).
	if err := registerWithLeader(ctx, t, c, victim.Server.Credentials()); err != nil {
		t.Fatalf("registering the manager's Node: %v", err)
	}
	victim.Stop()
	if _, err := c.ClientTo(leader).Delete(ctx, legion.KindNode, "", id, nil); err != nil {
		t.Fatalf("deleting the Node of the stopped manager %s: %v", id, err)
	}
	if member, _ := suffrage(t, leader.Store(), id); member {
		t.Fatal("the deleted Node's manager is still a Raft member")
	}
	victim.Restart()
	if member, _ := suffrage(t, victim.Store(), id); !member {
		t.Fatal("the stopped manager had its removal after all: this test shows nothing")
	}
	waitRefusedAsRemoved(ctx, t, c, victim, "the manager removed while down", 10*time.Second)
	// The others go on without it.
	if _, err := c.ClientTo(leader).ApplyOne(ctx, config("after-removal"), client.ApplyOptions{}); err != nil {
		t.Fatalf("a write after the removal: %v", err)
	}
	// Its Raft stops: no election every timeout, refused each time.
	testcluster.WaitFor(t, "the removed manager's Raft to stop", 10*time.Second, func() bool {
		return victim.Store().Raft().State() == raft.Shutdown
	})
	saysRemovedOnce(t, logs[slices.Index(c.Managers, victim)], id)
}

// The last voting manager's Node is not deleted: Raft would be left
// without a quorum.
func TestDeletingTheLastVotersNodeIsRefused(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := c.Managers[0]
	id := m.Server.NodeID()
	if err := register(ctx, nodeConn(t, m.Addr, m.Server.Credentials())); err != nil {
		t.Fatal(err)
	}
	_, err := c.Client().Delete(ctx, legion.KindNode, "", id, nil)
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "only voting manager") {
		t.Fatalf("deleting the only manager's Node: %v, want FAILED_PRECONDITION naming the only voting manager", err)
	}
	if _, err := c.Client().Get(ctx, legion.KindNode, "", id); err != nil {
		t.Fatalf("the Node after the refused delete: %v", err)
	}
	if member, voter := suffrage(t, m.Store(), id); !member || !voter {
		t.Fatalf("the manager after the refused delete: member=%v voter=%v", member, voter)
	}
}

// A dry run that deletes both managers' Nodes of two finds the second
// refused, as the deletes one after the other would: once the first is
// out, the second is the only voter. Each alone would go.
func TestCheckDeleteCountsTheVotersItTookOut(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2})
	c.WaitVoters(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.WaitLeader()
	var nodes []legion.Object
	for _, m := range c.Managers {
		// Registered with the leader, as each one's agent does.
		if err := registerWithLeader(ctx, t, c, m.Server.Credentials()); err != nil {
			t.Fatal(err)
		}
		o, err := c.Client().Get(ctx, legion.KindNode, "", m.Server.NodeID())
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, o)
	}
	for i, o := range nodes {
		if _, err := c.Client().CheckDelete(ctx, legion.KindNode, "", o.GetMetadata().Name, nil, nil); err != nil {
			t.Fatalf("check of the delete of manager %d's Node alone: %v", i, err)
		}
	}
	_, err := c.Client().CheckDelete(ctx, legion.KindNode, "", nodes[1].GetMetadata().Name, nil, nodes[:1])
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "only voting manager") {
		t.Fatalf("check of the delete of the second manager's Node after the first's: %v, want FAILED_PRECONDITION naming the only voting manager", err)
	}
	for _, m := range c.Managers {
		if member, voter := suffrage(t, leader.Store(), m.Server.NodeID()); !member || !voter {
			t.Fatalf("manager %s after the checks: member=%v voter=%v", m.Server.NodeID(), member, voter)
		}
	}
}

// legion node promote and demote change a manager's vote; a worker, an
// unknown node and the last voter are refused, each saying why.
func TestPromoteAndDemote(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.WaitLeader()
	follower := c.Managers[0]
	if follower == leader {
		follower = c.Managers[1]
	}
	w := c.Workers[0]
	if err := registerWithLeader(ctx, t, c, w.Server.Credentials()); err != nil {
		t.Fatal(err)
	}
	admin := c.ClientTo(follower)
	_, err := admin.SetVoter(ctx, w.Server.NodeID(), true)
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "is a worker") || !strings.Contains(err.Error(), "manager token") {
		t.Errorf("promoting a worker: %v, want FAILED_PRECONDITION saying how a worker becomes a manager", err)
	}
	if _, err := admin.SetVoter(ctx, "no-such-node", true); client.Code(err) != codes.NotFound {
		t.Errorf("promoting an unknown node: %v, want NOT_FOUND", err)
	}
	fid, lid := follower.Server.NodeID(), leader.Server.NodeID()
	if changed, err := admin.SetVoter(ctx, fid, false); err != nil || !changed {
		t.Fatalf("demoting %s: changed=%v %v", fid, changed, err)
	}
	if member, voter := suffrage(t, leader.Store(), fid); !member || voter {
		t.Fatalf("after the demotion: member=%v voter=%v, want a non-voting member", member, voter)
	}
	if changed, err := admin.SetVoter(ctx, fid, false); err != nil || changed {
		t.Errorf("demoting a non-voter again: changed=%v %v, want nothing to do", changed, err)
	}
	_, err = admin.SetVoter(ctx, lid, false)
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "only voting manager") {
		t.Errorf("demoting the last voter: %v, want FAILED_PRECONDITION naming the only voting manager", err)
	}
	if _, voter := suffrage(t, leader.Store(), lid); !voter {
		t.Fatal("the refused demotion took the last voter's vote")
	}
	if changed, err := admin.SetVoter(ctx, fid, true); err != nil || !changed {
		t.Fatalf("promoting %s: changed=%v %v", fid, changed, err)
	}
	if _, voter := suffrage(t, leader.Store(), fid); !voter {
		t.Fatal("the promoted manager does not vote")
	}
}

// legion status tells, of every manager, whether it leads, answers or
// not.
func TestStatusShowsEachManagersReachability(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	leader := c.WaitLeader()
	fs := c.Followers(leader)
	down, up := fs[0], fs[1]
	downID := down.Server.NodeID()
	down.Stop()
	want := map[string]string{leader.Server.NodeID(): server.ReachLeader, up.Server.NodeID(): server.ReachReachable, downID: server.ReachUnreachable}
	for _, asked := range []*testcluster.Manager{leader, up} {
		cl := c.ClientTo(asked)
		var got map[string]string
		testcluster.WaitFor(t, "the reachability seen from "+asked.Addr, 10*time.Second, func() bool {
			st, err := cl.Status(context.Background())
			if err != nil {
				return false
			}
			got = map[string]string{}
			for _, m := range st.Members {
				got[m.ID] = m.Reachability
			}
			return maps.Equal(got, want)
		})
	}
}

// A manager that knows no leader says why: while a majority of the
// voters answers, an election; with fewer, the cluster is frozen until
// the managers named are back, which no election changes.
//
// Its daemon's log says so too, with how to restart the cluster from it if
// the others are gone for good, where Raft's says only that votes fail.
func TestNoLeaderNamesTheManagersAMajorityWaitsFor(t *testing.T) {
	t.Parallel()
	c, logs := warnLogged(t, 3)
	leader := c.WaitLeader()
	fs := c.Followers(leader)
	left := fs[0]
	var gone []string
	for _, m := range []*testcluster.Manager{leader, fs[1]} {
		gone = append(gone, m.Server.NodeID())
		m.Stop()
	}
	cl, err := client.New(client.Options{Server: left.Addr, CredentialsFile: c.AdminFile(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := "no leader: 1 of the 3 voting managers answer, and electing one takes 2: the cluster is frozen until 1 of "
	var last error
	testcluster.WaitFor(t, "the lone manager to say why it has no leader", 30*time.Second, func() bool {
		_, last = cl.Get(context.Background(), legion.KindConfig, "default", "x")
		return last != nil && strings.Contains(last.Error(), want)
	})
	for _, id := range gone {
		if !strings.Contains(last.Error(), id) {
			t.Errorf("%v: does not name %s", last, id)
		}
	}
	if client.Code(last) != codes.Unavailable {
		t.Errorf("%v: code %s, want Unavailable (a retry may find a leader)", last, client.Code(last))
	}

	lines := logs[slices.Index(c.Managers, left)]
	deadline := time.After(testcluster.WriteTimeout + 3*server.FrozenCheck)
	for {
		var line string
		select {
		case line = <-lines:
		case <-deadline:
			t.Fatal("the lone manager's log never said the cluster is frozen")
		}
		if !strings.Contains(line, "no leader for") {
			continue
		}
		for _, w := range append(gone, strings.TrimPrefix(want, "no leader: "), "legion restore --data-dir "+left.Dir, "cluster of one from its own store") {
			if !strings.Contains(line, w) {
				t.Errorf("the warning does not say %q:\n%s", w, line)
			}
		}
		break
	}
}

// saysRemovedOnce reads a removed manager's log for as long as the
// frozen cluster's warning would take to come: it says once that it was
// removed and what brings its host back, then nothing of elections, and
// never that the cluster is frozen and to make a cluster of its data (the
// others refuse it, so it finds none of them answering).
func saysRemovedOnce(t *testing.T, lines logLines, id string) {
	t.Helper()
	said := 0
	quiet := time.After(testcluster.WriteTimeout + 2*server.FrozenCheck)
	for read := true; read; {
		select {
		case line := <-lines:
			switch {
			case strings.Contains(line, `msg="manager `+id+` was removed from the cluster`):
				said++
				for _, w := range []string{"serves only its status", "move its data directory aside", "join again"} {
					if !strings.Contains(line, w) {
						t.Errorf("the removal's line does not say %q:\n%s", w, line)
					}
				}
			case said > 0 && strings.Contains(line, "election"):
				t.Errorf("an election after the removal was logged:\n%s", line)
			case strings.Contains(line, "no leader for") || strings.Contains(line, "legion restore"):
				t.Errorf("the removed manager's log tells to restore the cluster from it:\n%s", line)
			}
		case <-quiet:
			read = false
		}
	}
	if said != 1 {
		t.Errorf("the removal was logged %d times, want once", said)
	}
}

// warnLogged is a cluster of n managers whose daemons' warnings go to
// lines a test reads, one logLines a manager.
func warnLogged(t *testing.T, n int) (*testcluster.Cluster, []logLines) {
	t.Helper()
	logs := make([]logLines, n)
	c := testcluster.New(t, testcluster.Options{Managers: n, Configure: func(i int, c *server.Config) {
		logs[i] = make(logLines, 1000)
		c.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelWarn}))
	}})
	return c, logs
}

// logLines is a daemon's log, a line per write, for a test to read as it
// comes; lines past its room are dropped rather than block the daemon.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}
