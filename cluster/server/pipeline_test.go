package server

import (
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testpoll"
	"google.golang.org/grpc"
)

// fakePipe is a pipeline stream's server side: Recv hands on what the
// test sends to in (io.EOF once it is closed), Send passes answers to out.
type fakePipe struct {
	grpc.ServerStream
	ctx   context.Context
	in    chan *pb.RaftMessage
	out   chan *pb.RaftMessage
	recvs atomic.Int64 // Recv calls so far
}

func (p *fakePipe) Context() context.Context { return p.ctx }

func (p *fakePipe) Recv() (*pb.RaftMessage, error) {
	p.recvs.Add(1)
	select {
	case m, ok := <-p.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
}

func (p *fakePipe) Send(m *pb.RaftMessage) error {
	p.out <- m
	return nil
}

// appendOf is a request carrying entries from..to of term 3, following on
// from entry from-1.
func appendOf(t *testing.T, from, to uint64) *pb.RaftMessage {
	t.Helper()
	data, err := json.Marshal(appendRequest(from, to))
	if err != nil {
		t.Fatal(err)
	}
	return &pb.RaftMessage{Payload: data}
}

// binaryAppendOf is appendOf's request as protobuf (RaftMessage.append).
func binaryAppendOf(from, to uint64) *pb.RaftMessage {
	return &pb.RaftMessage{Append: appendToProto(appendRequest(from, to))}
}

func appendRequest(from, to uint64) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader"), ID: []byte("l")}, Term: 3,
		PrevLogEntry: from - 1, PrevLogTerm: 3, LeaderCommitIndex: from - 1}
	for i := from; i <= to; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte("x")})
	}
	return req
}

func indexes(es []*raft.Log) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.Index)
	}
	return out
}

// Requests that reach a follower while it stores the one before go to
// raft as one append (one fdatasync), and each still gets its answer,
// which says the follower reads requests as protobuf; it reads them as
// JSON or as protobuf, mixed on one stream.
func TestPipelineStoresWaitingAppendsTogether(t *testing.T) {
	t.Parallel()
	tr := newTransport("follower", nil)
	t.Cleanup(func() { tr.Close() })
	svc := &raftService{current: func() *transport { return tr },
		member: func(context.Context) error { return nil }, stopping: tr.shutdown}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &fakePipe{ctx: ctx, in: make(chan *pb.RaftMessage), out: make(chan *pb.RaftMessage, 8)}
	done := make(chan error, 1)
	go func() { done <- svc.AppendEntriesPipeline(p) }()

	rpc := func() raft.RPC {
		t.Helper()
		select {
		case r := <-tr.Consumer():
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no append reached raft")
		}
		return raft.RPC{}
	}
	p.in <- appendOf(t, 10, 10)
	first := rpc()
	if got := indexes(first.Command.(*raft.AppendEntriesRequest).Entries); len(got) != 1 || got[0] != 10 {
		t.Fatalf("first append carries entries %v, want [10]", got)
	}
	// Two more arrive while raft stores the first; the reader has queued
	// both once it asks for a fourth message.
	p.in <- appendOf(t, 11, 11)
	p.in <- binaryAppendOf(12, 13)
	testpoll.Until(t, "two requests queued behind the first", 10*time.Second, time.Millisecond, func() bool { return p.recvs.Load() >= 4 })
	first.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true, LastLog: 10}, nil)
	second := rpc()
	req := second.Command.(*raft.AppendEntriesRequest)
	if got := indexes(req.Entries); len(got) != 3 || got[0] != 11 || got[2] != 13 {
		t.Fatalf("second append carries entries %v, want [11 12 13] in one", got)
	}
	if req.PrevLogEntry != 10 || req.LeaderCommitIndex != 11 {
		t.Fatalf("merged append follows %d with commit index %d, want 10 and 11", req.PrevLogEntry, req.LeaderCommitIndex)
	}
	second.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true, LastLog: 13}, nil)
	for i := range 3 {
		select {
		case m := <-p.out:
			var resp raft.AppendEntriesResponse
			if err := json.Unmarshal(m.Payload, &resp); err != nil || !resp.Success {
				t.Fatalf("answer %d: %+v %v", i+1, resp, err)
			}
			if !m.ReadsAppend {
				t.Fatalf("answer %d does not say the follower reads protobuf requests", i+1)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d answers for 3 requests", i)
		}
	}
	close(p.in)
	if err := <-done; err != nil {
		t.Fatalf("pipeline ended with %v", err)
	}
}

// Only a request that follows on exactly, from the same leader and term,
// joins the one before.
func TestMergeAppendsOnlyWhatFollowsOn(t *testing.T) {
	t.Parallel()
	decode := func(m *pb.RaftMessage) *raft.AppendEntriesRequest {
		r, err := decodeAppend(m)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	other := decode(appendOf(t, 12, 12))
	other.Term = 4
	stranger := decode(appendOf(t, 12, 12))
	stranger.Addr = []byte("another")
	for _, tc := range []struct {
		name string
		next *raft.AppendEntriesRequest
		want bool
	}{
		{"follows on", decode(appendOf(t, 12, 13)), true},
		{"gap", decode(appendOf(t, 13, 13)), false},
		{"overlap", decode(appendOf(t, 11, 11)), false},
		{"another term", other, false},
		{"another leader", stranger, false},
	} {
		req := decode(appendOf(t, 10, 11))
		if got := mergeAppends(req, tc.next); got != tc.want {
			t.Errorf("%s: merged %v, want %v", tc.name, got, tc.want)
		}
		if n := len(req.Entries); tc.want && n != 4 || !tc.want && n != 2 {
			t.Errorf("%s: %d entries after, want %d", tc.name, n, map[bool]int{true: 4, false: 2}[tc.want])
		}
	}
}
