package server

import (
	"context"
	"sync/atomic"
	"testing"

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
	if err := preVote(); err == nil {
		t.Fatal("a pre-vote refused as removed succeeded")
	}
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
