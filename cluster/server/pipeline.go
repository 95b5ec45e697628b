package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/internal/jsonfast"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pipelineDepth is how many AppendEntries may be in flight on a pipeline.
const pipelineDepth = 128

// pipeline sends AppendEntries on one stream without waiting for each
// answer; answers come back in order and are handed to raft on Consumer.
type pipeline struct {
	stream   grpc.BidiStreamingClient[pb.RaftMessage, pb.RaftMessage]
	cancel   context.CancelFunc
	inflight chan *appendFuture
	done     chan raft.AppendFuture
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
	ack      func(*raft.AppendEntriesResponse) // an answer that succeeded
	// binary is set once the follower's answers say it reads requests as
	// RaftMessage.append; until then (and always, to a manager built
	// before) they go as JSON.
	binary atomic.Bool
}

func (t *transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	c, err := t.client(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(withProtocol(context.Background()))
	stream, err := c.AppendEntriesPipeline(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	p := newPipeline(stream, cancel, func(r *raft.AppendEntriesResponse) { t.ack(target, r) })
	// The pipeline ends with the transport too.
	go func() {
		select {
		case <-t.shutdown:
			p.Close()
		case <-p.stop:
		}
	}()
	return p, nil
}

// newPipeline starts reading the answers of stream; cancel ends it.
func newPipeline(stream grpc.BidiStreamingClient[pb.RaftMessage, pb.RaftMessage], cancel context.CancelFunc,
	ack func(*raft.AppendEntriesResponse)) *pipeline {
	p := &pipeline{stream: stream, cancel: cancel, inflight: make(chan *appendFuture, pipelineDepth),
		done: make(chan raft.AppendFuture, pipelineDepth), stop: make(chan struct{}), ack: ack}
	p.wg.Add(1)
	go p.receive()
	return p
}

// AppendEntries sends a request in as many pieces as its size needs
// (splitAppend); its future waits for an answer to each.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	msgs, err := appendMessages(args, p.binary.Load())
	if err != nil {
		return nil, err
	}
	f := &appendFuture{start: time.Now(), args: args, resp: resp, parts: len(msgs), errCh: make(chan error, 1)}
	select {
	case p.inflight <- f:
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	}
	for _, m := range msgs {
		if err := p.stream.Send(m); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// appendMessages is a request as the pipeline sends it: as JSON
// (encodeAppend), or as protobuf in pieces cut as for JSON. A piece's
// protobuf is never larger than its JSON (data as it is rather than
// base64, numbers as varints), so each is under maxRaftPayload too.
func appendMessages(a *raft.AppendEntriesRequest, binary bool) ([]*pb.RaftMessage, error) {
	var out []*pb.RaftMessage
	if !binary {
		pieces, err := encodeAppend(a)
		if err != nil {
			return nil, err
		}
		for _, payload := range pieces {
			out = append(out, &pb.RaftMessage{Payload: payload})
		}
		return out, nil
	}
	for _, piece := range splitAppend(a) {
		out = append(out, &pb.RaftMessage{Append: appendToProto(piece)})
	}
	return out, nil
}

// receive matches answers to requests in order; when the stream breaks,
// every request still in flight fails, and is still handed to raft, which
// then stops using the pipeline.
func (p *pipeline) receive() {
	defer p.wg.Done()
	for {
		var f *appendFuture
		select {
		case f = <-p.inflight:
		case <-p.stop:
			return
		}
		// One answer per piece: the first refusal stands, else the last.
		var err error
		for k := 0; k < f.parts && err == nil; k++ {
			var msg *pb.RaftMessage
			if msg, err = p.stream.Recv(); err != nil {
				break
			}
			if msg.ReadsAppend {
				p.binary.Store(true)
			}
			var r raft.AppendEntriesResponse
			if err = jsonfast.Unmarshal(msg.Payload, &r); err == nil && (k == 0 || f.resp.Success) {
				*f.resp = r
			}
		}
		if err == nil {
			p.ack(f.resp)
		}
		f.errCh <- err
		select {
		case p.done <- f:
		case <-p.stop:
			return
		}
		if err != nil {
			p.Close()
			return
		}
	}
}

func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

func (p *pipeline) Close() error {
	p.once.Do(func() {
		close(p.stop)
		p.cancel()
	})
	return nil
}

type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	parts int // messages the request went in, each answered
	errCh chan error
	err   error
	got   bool
	mu    sync.Mutex
}

func (f *appendFuture) Error() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.got {
		f.err, f.got = <-f.errCh, true
	}
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// AppendEntriesPipeline answers a pipeline's requests in order. Requests
// that arrived while the one before was being stored go to raft as one
// (see mergeAppends), so a follower whose disk is slower than the
// leader's appends them with one fdatasync rather than one each, instead
// of falling further behind; each request still gets its own answer.
func (s *raftService) AppendEntriesPipeline(stream grpc.BidiStreamingServer[pb.RaftMessage, pb.RaftMessage]) error {
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
	// Requests are read aside, so the stream ends at shutdown rather than
	// holding a graceful stop until the leader hangs up, and so those
	// that arrive during an append wait together for the next.
	type recv struct {
		msg *pb.RaftMessage
		err error
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	in := make(chan recv, pipelineDepth)
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case in <- recv{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var held *recv // read while merging, but not mergeable: next
	for {
		var r recv
		if held != nil {
			r, held = *held, nil
		} else {
			select {
			case r = <-in:
			case <-s.stopping:
				return status.Error(codes.Unavailable, "raft: shutting down")
			}
		}
		if errors.Is(r.err, io.EOF) {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		req, err := decodeAppend(r.msg)
		if err != nil {
			return err
		}
		// Take what else is waiting while it follows on.
		answers := 1
	merge:
		for answers < pipelineDepth {
			select {
			case next := <-in:
				if next.err != nil {
					held = &next
					break merge
				}
				nreq, err := decodeAppend(next.msg)
				if err != nil {
					return err
				}
				if !mergeAppends(req, nreq) {
					held = &recv{msg: next.msg}
					break merge
				}
				answers++
			default:
				break merge
			}
		}
		resp, err := t.dispatch(ctx, req, nil)
		if err != nil {
			return err
		}
		out, err := json.Marshal(resp)
		if err != nil {
			return err
		}
		// Each request merged gets the answer of the whole: its entries
		// were stored with the others, or none were.
		for range answers {
			if err := stream.Send(&pb.RaftMessage{Payload: out, ReadsAppend: true}); err != nil {
				return err
			}
		}
	}
}

// decodeAppend reads a pipeline's request, as protobuf or as JSON.
func decodeAppend(m *pb.RaftMessage) (*raft.AppendEntriesRequest, error) {
	if m.Append != nil {
		req, err := appendFromProto(m.Append)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "raft: decoding AppendEntries: %v", err)
		}
		return req, nil
	}
	var req raft.AppendEntriesRequest
	if err := jsonfast.Unmarshal(m.Payload, &req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "raft: decoding AppendEntries: %v", err)
	}
	return &req, nil
}

// mergeAppends adds next's entries to req when next follows on from req
// exactly (same leader and term, its previous entry req's last), so that
// storing the two as one is what storing them in turn would do; it
// reports whether it did.
func mergeAppends(req, next *raft.AppendEntriesRequest) bool {
	lastIndex, lastTerm := req.PrevLogEntry, req.PrevLogTerm
	if n := len(req.Entries); n > 0 {
		lastIndex, lastTerm = req.Entries[n-1].Index, req.Entries[n-1].Term
	}
	if next.Term != req.Term || !bytes.Equal(next.Addr, req.Addr) || !bytes.Equal(next.ID, req.ID) ||
		next.PrevLogEntry != lastIndex || next.PrevLogTerm != lastTerm {
		return false
	}
	req.Entries = append(req.Entries, next.Entries...)
	req.LeaderCommitIndex = max(req.LeaderCommitIndex, next.LeaderCommitIndex)
	return true
}
