package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// snapshotChunk is the size of the pieces a snapshot travels in.
const snapshotChunk = 1 << 20

// raftCallTimeout bounds one Raft call to a peer.
const raftCallTimeout = 10 * time.Second

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
	closed    bool
}

var (
	_ raft.Transport   = (*transport)(nil)
	_ raft.WithClose   = (*transport)(nil)
	_ raft.WithPreVote = (*transport)(nil)
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

func (t *transport) call(target raft.ServerAddress, args, resp any,
	method func(pb.RaftClient, context.Context, *pb.RaftMessage, ...grpc.CallOption) (*pb.RaftMessage, error)) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(args)
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
		return fmt.Errorf("raft call to %s: %w", target, err)
	}
	return json.Unmarshal(out.Payload, resp)
}

func (t *transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.call(target, args, resp, pb.RaftClient.AppendEntries)
}

func (t *transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.call(target, args, resp, pb.RaftClient.RequestVote)
}

func (t *transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.call(target, args, resp, pb.RaftClient.RequestPreVote)
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
	return json.Unmarshal(out.Payload, resp)
}

func (t *transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }
func (t *transport) DecodePeer(b []byte) raft.ServerAddress                     { return raft.ServerAddress(b) }

func (t *transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.mu.Lock()
	t.heartbeat = cb
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
	if err := json.Unmarshal(in.Payload, cmd); err != nil {
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
	if err := json.Unmarshal(first.Request, &req); err != nil {
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
