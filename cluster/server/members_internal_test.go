package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
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

// A third manager's join answers only once the second holds its
// promotion too. The promotion commits on the leader and the new voter
// alone; were the leader lost while the second lacked it, the second
// would refuse the new voter's election (no such voter, to it) and could
// not win one without the leader: no leader until it came back. Here the
// leader's appends to the second are held up, so without the wait the
// join answers before the second has the change.
func TestJoinAnswersOnceEveryVoterHoldsThePromotion(t *testing.T) {
	t.Parallel()
	timing := func(c *Config) {
		// A heartbeat timeout, the bound of the wait, well over the hold.
		c.Timing = store.FastTiming()
		c.Timing.HeartbeatTimeout, c.Timing.ElectionTimeout, c.Timing.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	}
	leader, second, admin := joinedPair(t, "manager", timing)
	const hold = 300 * time.Millisecond
	slowAppendsTo(t, leader, second.addr, hold)
	third := newManager(t, timing)
	t.Cleanup(third.stop)
	join(t, admin, third, "manager", leader.addr)
	cfg, _, err := raftConfig(second.s.store())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := findServer(cfg, third.s.NodeID()); !ok || m.Suffrage != raft.Voter {
		t.Fatalf("the join answered while the second manager had the third as %+v (listed %v), want it a voter there", m, ok)
	}
}

// slowAppendsTo holds up each of m's Raft appends to addr (calls and
// pipeline messages) for d, from its next connection there on.
func slowAppendsTo(t *testing.T, m *manager, addr string, d time.Duration) {
	t.Helper()
	tr := m.s.transport()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	dial := tr.dial
	tr.dial = func(to string) (*grpc.ClientConn, error) {
		if to != addr {
			return dial(to)
		}
		creds := m.s.Credentials()
		return grpc.NewClient(to, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
			grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if method == pb.Raft_AppendEntries_FullMethodName {
					time.Sleep(d)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil || method != pb.Raft_AppendEntriesPipeline_FullMethodName {
					return s, err
				}
				return slowSend{s, d}, nil
			}))
	}
	if c := tr.conns[raft.ServerAddress(addr)]; c != nil {
		c.Close() // raft dials again, through the slow connection
		delete(tr.conns, raft.ServerAddress(addr))
	}
}

// slowSend holds each message sent on a stream for d.
type slowSend struct {
	grpc.ClientStream
	d time.Duration
}

func (s slowSend) SendMsg(m any) error {
	time.Sleep(s.d)
	return s.ClientStream.SendMsg(m)
}
