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
