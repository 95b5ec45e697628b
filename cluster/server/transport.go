package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/jsonfast"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// snapshotChunk is the size of the pieces a snapshot travels in.
const snapshotChunk = 1 << 20

// raftCallTimeout bounds one Raft call to a peer.
const raftCallTimeout = 10 * time.Second

// Raft messages between managers hold by construction within MaxMessage.
// raft batches up to MaxAppendEntries entries (512) into one
// AppendEntries, so the entries' count times their size bounds nothing
// useful; instead the transport cuts a request whose JSON is over
// maxRaftPayload into consecutive requests, each under it. An entry is at
// most store.MaxEntry (the store proposes nothing larger), so every entry
// fits in a piece of its own: its data travels as base64 (4/3) plus its
// other fields. The constant checks below fail to compile if the figures
// ever stop agreeing.
const (
	maxRaftPayload  = 16 << 20
	entryOverhead   = 256  // a log entry's JSON besides its data and extensions
	requestOverhead = 1024 // an AppendEntries' JSON besides its entries
	protoOverhead   = 64   // the RaftMessage around the JSON
	maxEntryJSON    = (store.MaxEntry+2)/3*4 + entryOverhead
)

// A negative constant does not convert to uint: these fail to build
// unless the largest entry fits a piece and a piece fits a gRPC message.
const (
	_ = uint(maxRaftPayload - requestOverhead - maxEntryJSON)
	_ = uint(MaxMessage - protoOverhead - maxRaftPayload)
)

// transport is raft.Transport over the manager's gRPC port: outgoing calls
// go through the Raft service of the peer (mutual TLS with the node's
// certificate), incoming ones arrive through raftService and are handed
// to raft on the consumer channel.
type transport struct {
	local    raft.ServerAddress
	dial     func(addr string) (*grpc.ClientConn, error)
	consumer chan raft.RPC
	shutdown chan struct{}

	mu        sync.Mutex
	conns     map[raft.ServerAddress]*grpc.ClientConn
	heartbeat func(raft.RPC)
	// screen sees vote requests before raft (store.VoteScreener).
	screen func(req any) (resp any, answered bool)
	closed bool
	// acked is the last log index each follower acknowledged, for the
	// leader's lag metric (metrics.go).
	acked map[raft.ServerAddress]uint64
	// removed: a peer refused this manager's certificate as that of a
	// removed node (legionpb.NodeRemoved); see refusedAsRemoved.
	removed bool
	// onRemoved is called, on a goroutine of its own, when a peer first
	// refuses this manager as removed (whenRemoved).
	onRemoved func()
}

var (
	_ raft.Transport     = (*transport)(nil)
	_ raft.WithClose     = (*transport)(nil)
	_ raft.WithPreVote   = (*transport)(nil)
	_ store.VoteScreener = (*transport)(nil)
)

func newTransport(local string, dial func(string) (*grpc.ClientConn, error)) *transport {
	return &transport{
		local:    raft.ServerAddress(local),
		dial:     dial,
		consumer: make(chan raft.RPC),
		shutdown: make(chan struct{}),
		conns:    map[raft.ServerAddress]*grpc.ClientConn{},
	}
}

func (t *transport) Consumer() <-chan raft.RPC     { return t.consumer }
func (t *transport) LocalAddr() raft.ServerAddress { return t.local }

func (t *transport) client(target raft.ServerAddress) (pb.RaftClient, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, raft.ErrTransportShutdown
	}
	c, ok := t.conns[target]
	if !ok {
		var err error
		if c, err = t.dial(string(target)); err != nil {
			return nil, fmt.Errorf("raft: dialling %s: %w", target, err)
		}
		t.conns[target] = c
	}
	return pb.NewRaftClient(c), nil
}

type raftMethod func(pb.RaftClient, context.Context, *pb.RaftMessage, ...grpc.CallOption) (*pb.RaftMessage, error)

func (t *transport) call(target raft.ServerAddress, args, resp any, method raftMethod) error {
	payload, err := json.Marshal(args)
	if err != nil {
		return err
	}
	return t.send(target, payload, resp, method)
}

func (t *transport) send(target raft.ServerAddress, payload []byte, resp any, method raftMethod) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), raftCallTimeout)
	defer cancel()
	ctx = withProtocol(ctx)
	go func() {
		select {
		case <-t.shutdown:
			cancel()
		case <-ctx.Done():
		}
	}()
	out, err := method(c, ctx, &pb.RaftMessage{Payload: payload})
	if err != nil {
		if _, ok := pb.NodeRemovedMessage(err); ok {
			t.mu.Lock()
			first, hook := !t.removed, t.onRemoved
			t.removed = true
			t.mu.Unlock()
			if first && hook != nil {
				go hook() // not on Raft's goroutine, which the hook stops
			}
		}
		return fmt.Errorf("raft call to %s: %w", target, err)
	}
	return jsonfast.Unmarshal(out.Payload, resp)
}

// whenRemoved has f called, on a goroutine of its own, once a peer
// refuses this manager as removed: at once if one already has, since Raft
// runs, and may call an election, before its store is handed over.
func (t *transport) whenRemoved(f func()) {
	t.mu.Lock()
	t.onRemoved = f
	already := t.removed
	t.mu.Unlock()
	if already {
		go f()
	}
}

// refusedAsRemoved reports whether a peer refused this manager as a
// removed node. A manager removed while it was down, or whose removal's
// entry did not reach it, still finds itself in its own configuration;
// the others' answer to its election is then how it learns. Only that
// refusal counts, not a peer not knowing it: the cluster recorded the
// removal, and a member that joins again does so with a new certificate.
func (t *transport) refusedAsRemoved() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removed
}

// AppendEntries sends a request in as many pieces as its size needs, one
// after another; the first piece the follower refuses ends it, and its
// answer is raft's.
func (t *transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	pieces, err := encodeAppend(args)
	if err != nil {
		return err
	}
	for _, p := range pieces {
		*resp = raft.AppendEntriesResponse{}
		if err := t.send(target, p, resp, pb.RaftClient.AppendEntries); err != nil {
			return err
		}
		if !resp.Success {
			return nil
		}
	}
	t.ack(target, resp)
	return nil
}

// encodeAppend encodes a request as one payload, or, when that is over
// maxRaftPayload, as consecutive requests each under it.
func encodeAppend(a *raft.AppendEntriesRequest) ([][]byte, error) {
	pieces := splitAppend(a)
	var out [][]byte
	for _, piece := range pieces {
		p, err := json.Marshal(piece)
		if err != nil {
			return nil, err
		}
		if len(p) > maxRaftPayload {
			return nil, fmt.Errorf("raft: an AppendEntries piece of %d entries is %d bytes, over the %d a message may carry", len(piece.Entries), len(p), maxRaftPayload)
		}
		out = append(out, p)
	}
	return out, nil
}

// entryJSON bounds the JSON of one log entry from above.
func entryJSON(e *raft.Log) int {
	return base64.StdEncoding.EncodedLen(len(e.Data)) + base64.StdEncoding.EncodedLen(len(e.Extensions)) + entryOverhead
}

// splitAppend cuts a request's entries into consecutive requests whose
// JSON stays under maxRaftPayload. Each piece names the entry before its
// first as its previous one, so the follower checks the log as for one
// request; a piece before the last carries a commit index no later than
// its own last entry, so a follower never commits past what it has been
// sent in this request (the Raft paper's rule).
func splitAppend(a *raft.AppendEntriesRequest) []*raft.AppendEntriesRequest {
	var out []*raft.AppendEntriesRequest
	start, size := 0, requestOverhead
	cut := func(end int) {
		piece := *a
		piece.Entries = a.Entries[start:end]
		if start > 0 {
			prev := a.Entries[start-1]
			piece.PrevLogEntry, piece.PrevLogTerm = prev.Index, prev.Term
		}
		if end < len(a.Entries) {
			piece.LeaderCommitIndex = min(a.LeaderCommitIndex, a.Entries[end-1].Index)
		}
		out = append(out, &piece)
	}
	for i, e := range a.Entries {
		n := entryJSON(e)
		if i > start && size+n > maxRaftPayload {
			cut(i)
			start, size = i, requestOverhead
		}
		size += n
	}
	cut(len(a.Entries))
	return out
}

func (t *transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.noVotes(target); err != nil {
		return err
	}
	return t.call(target, args, resp, pb.RaftClient.RequestVote)
}

func (t *transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.noVotes(target); err != nil {
		return err
	}
	return t.call(target, args, resp, pb.RaftClient.RequestPreVote)
}

// noVotes keeps a manager the others refused as removed from asking for
// votes: its Raft, which still lists it, calls an election every timeout,
// and each would only be refused again and logged by the others.
func (t *transport) noVotes(target raft.ServerAddress) error {
	if t.refusedAsRemoved() {
		return fmt.Errorf("raft call to %s: not asked: this manager was removed from the cluster", target)
	}
	return nil
}

func (t *transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.call(target, args, resp, pb.RaftClient.TimeoutNow)
}

func (t *transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	head, err := json.Marshal(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.InstallSnapshot(withProtocol(ctx))
	if err != nil {
		return fmt.Errorf("raft snapshot to %s: %w", target, err)
	}
	if err := stream.Send(&pb.SnapshotChunk{Request: head}); err != nil {
		return fmt.Errorf("raft snapshot to %s: %w", target, err)
	}
	buf := make([]byte, snapshotChunk)
	for {
		n, rerr := io.ReadFull(data, buf)
		if n > 0 {
			if err := stream.Send(&pb.SnapshotChunk{Data: buf[:n]}); err != nil {
				return fmt.Errorf("raft snapshot to %s: %w", target, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("raft snapshot to %s: reading: %w", target, rerr)
		}
	}
	out, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("raft snapshot to %s: %w", target, err)
	}
	return jsonfast.Unmarshal(out.Payload, resp)
}

func (t *transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }
func (t *transport) DecodePeer(b []byte) raft.ServerAddress                     { return raft.ServerAddress(b) }

func (t *transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.mu.Lock()
	t.heartbeat = cb
	t.mu.Unlock()
}

func (t *transport) ScreenVotes(screen func(any) (any, bool)) {
	t.mu.Lock()
	t.screen = screen
	t.mu.Unlock()
}

// Close ends the transport: raft calls it at shutdown.
func (t *transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	close(t.shutdown)
	for _, c := range t.conns {
		c.Close()
	}
	t.conns = nil
	return nil
}

// dispatch hands an incoming call to raft and waits for its answer.
func (t *transport) dispatch(ctx context.Context, cmd any, r io.Reader) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: r, RespChan: respCh}
	switch cmd.(type) {
	case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
		t.mu.Lock()
		screen := t.screen
		t.mu.Unlock()
		if screen != nil {
			if resp, answered := screen(cmd); answered {
				return resp, nil
			}
		}
	}
	if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && isHeartbeat(ae) {
		t.mu.Lock()
		hb := t.heartbeat
		t.mu.Unlock()
		if hb != nil {
			hb(rpc)
			goto wait
		}
	}
	select {
	case t.consumer <- rpc:
	case <-t.shutdown:
		return nil, status.Error(codes.Unavailable, "raft: shutting down")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
wait:
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return nil, status.Error(codes.Unknown, resp.Error.Error())
		}
		return resp.Response, nil
	case <-t.shutdown:
		return nil, status.Error(codes.Unavailable, "raft: shutting down")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	return a.Term != 0 && a.Addr != nil && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

// raftService answers the Raft calls of other managers for whatever
// transport is current (none before init or join).
type raftService struct {
	pb.UnimplementedRaftServer
	current func() *transport
	member  func(context.Context) error // refuses callers outside the membership
	// stopping closes at shutdown, ending pipeline streams.
	stopping <-chan struct{}
}

func (s *raftService) handle(ctx context.Context, in *pb.RaftMessage, cmd any) (*pb.RaftMessage, error) {
	t := s.current()
	if t == nil {
		return nil, status.Error(codes.Unavailable, "raft: this manager's store is not open")
	}
	if err := checkProtocol(ctx); err != nil {
		return nil, err
	}
	if err := s.member(ctx); err != nil {
		return nil, err
	}
	if err := jsonfast.Unmarshal(in.Payload, cmd); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "raft: decoding %T: %v", cmd, err)
	}
	resp, err := t.dispatch(ctx, cmd, nil)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	return &pb.RaftMessage{Payload: out}, nil
}

func (s *raftService) AppendEntries(ctx context.Context, in *pb.RaftMessage) (*pb.RaftMessage, error) {
	return s.handle(ctx, in, &raft.AppendEntriesRequest{})
}

func (s *raftService) RequestVote(ctx context.Context, in *pb.RaftMessage) (*pb.RaftMessage, error) {
	return s.handle(ctx, in, &raft.RequestVoteRequest{})
}

func (s *raftService) RequestPreVote(ctx context.Context, in *pb.RaftMessage) (*pb.RaftMessage, error) {
	return s.handle(ctx, in, &raft.RequestPreVoteRequest{})
}

func (s *raftService) TimeoutNow(ctx context.Context, in *pb.RaftMessage) (*pb.RaftMessage, error) {
	return s.handle(ctx, in, &raft.TimeoutNowRequest{})
}

func (s *raftService) InstallSnapshot(stream grpc.ClientStreamingServer[pb.SnapshotChunk, pb.RaftMessage]) error {
	t := s.current()
	if t == nil {
		return status.Error(codes.Unavailable, "raft: this manager's store is not open")
	}
	if err := checkProtocol(stream.Context()); err != nil {
		return err
	}
	if err := s.member(stream.Context()); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	var req raft.InstallSnapshotRequest
	if err := jsonfast.Unmarshal(first.Request, &req); err != nil {
		return status.Errorf(codes.InvalidArgument, "raft: decoding the snapshot request: %v", err)
	}
	resp, err := t.dispatch(stream.Context(), &req, &chunkReader{stream: stream, buf: first.Data})
	if err != nil {
		return err
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return stream.SendAndClose(&pb.RaftMessage{Payload: out})
}

// chunkReader reads a snapshot from the chunks of a stream.
type chunkReader struct {
	stream grpc.ClientStreamingServer[pb.SnapshotChunk, pb.RaftMessage]
	buf    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		c, err := r.stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		r.buf = c.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
