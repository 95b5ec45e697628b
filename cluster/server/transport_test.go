package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/legionbsd/legion/internal/proto"
)

// Once a peer refuses this manager as removed, it asks no peer for a vote
// again: each ask would only be refused and logged.
func TestRemovedManagerAsksNoMoreVotes(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	send, addr := serveRaft(t, make(chan []*raft.Log, 1), func(context.Context) error {
		calls.Add(1)
		return pb.NodeRemoved("node m2 was removed from the cluster")
	})
	vote := func() error {
		return send.RequestVote("f", addr, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 4}, &raft.RequestVoteResponse{})
	}
	preVote := func() error {
		return send.RequestPreVote("f", addr, &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 5}, &raft.RequestPreVoteResponse{})
	}
	// The server's hook (it stops Raft) runs on the first refusal, and
	// at once when it is set after one: Raft may call an election before
	// its store is handed over.
	hooked := make(chan string, 2)
	send.whenRemoved(func() { hooked <- "set before" })
	if err := preVote(); err == nil {
		t.Fatal("a pre-vote refused as removed succeeded")
	}
	hookRan(t, hooked, "set before")
	send.whenRemoved(func() { hooked <- "set after" })
	hookRan(t, hooked, "set after")
	if !send.refusedAsRemoved() || calls.Load() != 1 {
		t.Fatalf("after the refusal: refused as removed %v, calls %d; want true, 1", send.refusedAsRemoved(), calls.Load())
	}
	if err := vote(); err == nil {
		t.Fatal("a vote after the refusal succeeded")
	}
	if err := preVote(); err == nil {
		t.Fatal("a pre-vote after the refusal succeeded")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the peer was asked %d times, want once: a removed manager went on asking for votes", n)
	}
}

// hookRan waits for the whenRemoved hook that says want.
func hookRan(t *testing.T, hooked <-chan string, want string) {
	t.Helper()
	select {
	case got := <-hooked:
		if got != want {
			t.Fatalf("hook %q ran, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the hook %s the refusal never ran", want)
	}
}

// The transport shows vote requests to the store's screen before raft
// (store.VoteScreener): an answer goes back without raft, a request
// left unanswered reaches raft as the screen left it, and other calls
// never pass through it.
func TestTransportScreensVotes(t *testing.T) {
	t.Parallel()
	tr := newTransport("m3", nil)
	t.Cleanup(func() { tr.Close() })
	var screened []any
	tr.ScreenVotes(func(req any) (any, bool) {
		screened = append(screened, req)
		switch req := req.(type) {
		case *raft.RequestPreVoteRequest:
			return &raft.RequestPreVoteResponse{Term: req.Term, Granted: true}, true
		case *raft.RequestVoteRequest:
			req.LeadershipTransfer = true
		}
		return nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Nothing reads the consumer yet: an answer that waited for raft
	// would not come.
	resp, err := tr.dispatch(ctx, &raft.RequestPreVoteRequest{Term: 9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv, ok := resp.(*raft.RequestPreVoteResponse); !ok || !pv.Granted || pv.Term != 9 {
		t.Fatalf("pre-vote answered %#v, want the screen's grant in term 9", resp)
	}
	raftGot := make(chan any, 2)
	go func() {
		for range 2 {
			select {
			case rpc := <-tr.Consumer():
				raftGot <- rpc.Command
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case <-ctx.Done():
				return
			}
		}
	}()
	if _, err := tr.dispatch(ctx, &raft.RequestVoteRequest{Term: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := (<-raftGot).(*raft.RequestVoteRequest); !ok || !v.LeadershipTransfer {
		t.Errorf("raft was handed %#v, want the vote as the screen marked it", v)
	}
	if _, err := tr.dispatch(ctx, &raft.AppendEntriesRequest{Term: 10, PrevLogEntry: 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := (<-raftGot).(*raft.AppendEntriesRequest); !ok {
		t.Error("raft was not handed the AppendEntries")
	}
	if len(screened) != 2 {
		t.Errorf("the screen saw %d requests, want the pre-vote and the vote alone", len(screened))
	}
}
