package store

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// screenedInmem is raft's in-memory transport with the vote screen
// (VoteScreener) the managers' gRPC transport has: requests pass through
// a pump that shows votes to the screen before raft.
type screenedInmem struct {
	*raft.InmemTransport
	out       chan raft.RPC
	done      chan struct{}
	closeOnce sync.Once
	screen    atomic.Pointer[func(any) (any, bool)]
}

func newScreenedInmem(tr *raft.InmemTransport) *screenedInmem {
	s := &screenedInmem{InmemTransport: tr, out: make(chan raft.RPC), done: make(chan struct{})}
	go s.pump()
	return s
}

func (s *screenedInmem) ScreenVotes(screen func(any) (any, bool)) { s.screen.Store(&screen) }

func (s *screenedInmem) Consumer() <-chan raft.RPC { return s.out }

func (s *screenedInmem) pump() {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-s.InmemTransport.Consumer():
		case <-s.done:
			return
		}
		if screen := s.screen.Load(); screen != nil {
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
				if resp, answered := (*screen)(rpc.Command); answered {
					rpc.Respond(resp, nil)
					continue
				}
			}
		}
		select {
		case s.out <- rpc:
		case <-s.done:
			return
		}
	}
}

func (s *screenedInmem) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return s.InmemTransport.Close()
}

// openNodeScreened is openNodeTiming over a screenedInmem transport.
func openNodeScreened(t testing.TB, id, dir string, timing Timing) *node {
	t.Helper()
	return openNodeOver(t, id, dir, timing, nil, true)
}

// screenedCluster is m1 leading m2 and m3, each over a screenedInmem
// transport with its timing (the screen set on every one: Open sets it
// only with standWatch on). Those slow names are held as raft is between
// the heartbeat timeout and its own timer firing (up to two more
// timeouts): their raft waits a minute before it stands, while their
// store counts its own timing. The followers hear m1 when it returns.
func screenedCluster(t *testing.T, timings [3]Timing, slow ...string) []*node {
	t.Helper()
	var ns []*node
	t.Cleanup(func() {
		for _, n := range ns {
			n.s.Close()
		}
	})
	for i, tm := range timings {
		ns = append(ns, openNodeScreened(t, fmt.Sprint("m", i+1), t.TempDir(), tm))
	}
	formCluster(t, ns)
	for _, n := range ns {
		n.screened.ScreenVotes(n.s.screenVote)
		if slices.Contains(slow, n.id) {
			rc := n.s.Raft().ReloadableConfig()
			rc.HeartbeatTimeout, rc.ElectionTimeout = time.Minute, time.Minute
			if err := n.s.Raft().ReloadConfig(rc); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the followers to hear m1", 5*time.Second, func() bool {
		for _, n := range ns[1:] {
			if _, id := n.s.Leader(); id != "m1" || time.Since(n.s.Raft().LastContact()) > timings[0].HeartbeatTimeout/5 {
				return false
			}
		}
		return true
	})
	return ns
}

// kill closes n's store and cuts it off from the others.
func kill(n *node, others ...*node) {
	n.s.Close()
	for _, o := range others {
		o.tr.Disconnect(n.tr.LocalAddr())
	}
}

// A follower that has heard nothing from its leader for its heartbeat
// timeout votes for a candidate though raft has not yet noticed the
// silence. Raft alone would turn m2 away while m3's raft waits its
// minute, and no leader could be elected; with the screen, m2 wins as
// soon as it stands.
func TestSilentFollowerVotesBeforeRaftNotices(t *testing.T) {
	timing := scaledTiming()
	held := timing
	held.StandTimeout, held.ElectionJitter = 0, 0 // no standWatch: m3 stands only when its raft does
	ns := screenedCluster(t, [3]Timing{timing, timing, held}, "m3")
	m2, m3 := ns[1], ns[2]
	kill(ns[0], m2, m3)
	waitFor(t, "m2 to lead", 10*time.Second, m2.s.IsLeader)
	waitFor(t, "m3 to follow m2", 5*time.Second, func() bool {
		_, id := m3.s.Leader()
		return id == "m2"
	})
	if st := m3.s.Raft().State(); st != raft.Follower {
		t.Errorf("m3 is %s, want a follower: it voted, it never stood", st)
	}
}

// A replica that granted a pre-vote does not stand while the candidate
// may still be asking for votes (votedLately), and stands once that
// time is past. m3 stands only through standWatch and is told, all
// along a window longer than its threshold, that it just granted one;
// m2 never stands.
func TestReplicaThatPreVotedHoldsBack(t *testing.T) {
	timing := scaledTiming()
	held := timing
	held.StandTimeout, held.ElectionJitter = 0, 0
	ns := screenedCluster(t, [3]Timing{timing, held, timing}, "m2", "m3")
	m2, m3 := ns[1], ns[2]
	k0 := time.Now()
	kill(ns[0], m2, m3)
	// A grant renewed at standWatch's own tick, so each look sees one.
	tick := time.NewTicker(timing.StandTimeout / 20)
	defer tick.Stop()
	for time.Since(k0) < 3*(timing.HeartbeatTimeout+timing.ElectionJitter) {
		m3.s.preVoted.Store(time.Now().UnixNano())
		if st := m3.s.Raft().State(); st != raft.Follower {
			t.Fatalf("m3 is %s %s after the kill, having just granted a pre-vote", st, time.Since(k0).Round(time.Millisecond))
		}
		<-tick.C
	}
	waitFor(t, "m3 to lead once its grant is old", 10*time.Second, m3.s.IsLeader)
}

// preVote answers as raft's requestPreVote does once no leader is known.
func TestPreVoteFollowsRaftsRules(t *testing.T) {
	voters := []raft.Server{{ID: "m1", Suffrage: raft.Voter}, {ID: "m2", Suffrage: raft.Voter}, {ID: "m4", Suffrage: raft.Nonvoter}}
	us := voterState{term: 7, lastIndex: 100, lastTerm: 6, servers: voters}
	ask := func(id string, term, index, lastTerm uint64) *raft.RequestPreVoteRequest {
		return &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte(id)}, Term: term, LastLogIndex: index, LastLogTerm: lastTerm}
	}
	for _, c := range []struct {
		name    string
		v       voterState
		req     *raft.RequestPreVoteRequest
		granted bool
		term    uint64
		refused string
	}{
		{"a voter as up to date", us, ask("m2", 8, 100, 6), true, 8, ""},
		{"a voter with a longer log", us, ask("m2", 8, 120, 6), true, 8, ""},
		{"a voter with a later last term", us, ask("m2", 8, 50, 7), true, 8, ""},
		{"a shorter log", us, ask("m2", 8, 99, 6), false, 8, "our last index is greater"},
		{"an earlier last term", us, ask("m2", 8, 200, 5), false, 8, "our last term is greater"},
		{"a term behind ours", us, ask("m2", 6, 100, 6), false, 7, "our term is greater"},
		{"our own term", us, ask("m2", 7, 100, 6), true, 7, ""},
		{"a non-voter", us, ask("m4", 8, 100, 6), false, 8, "node is not a voter"},
		{"a stranger", us, ask("m9", 8, 100, 6), false, 7, "node is not in configuration"},
		{"anyone, before any configuration", voterState{term: 1}, ask("m9", 2, 0, 0), true, 2, ""},
	} {
		granted, term, refused := preVote(c.v, c.req)
		if granted != c.granted || term != c.term || refused != c.refused {
			t.Errorf("%s: granted %v in term %d (refused: %q), want %v in %d (%q)", c.name, granted, term, refused, c.granted, c.term, c.refused)
		}
	}
}
