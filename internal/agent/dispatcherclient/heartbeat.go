package dispatcherclient

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	legionpb "github.com/legionbsd/legion/internal/proto"
)

// Heartbeats go on one stream to the manager that takes them
// (HeartbeatStream): a beat is then one message each way, where a call
// costs the manager a stream's setup, headers and trailers every time,
// which at 256 nodes was most of what heartbeats cost the leader. The
// stream is opened by the first beat to a manager and kept while it
// answers; a beat that fails on it fails as a call would (the next
// manager is tried), and the next beat opens a new one. A manager that
// predates the stream takes its beats as calls, and is asked again now
// and then.

func (s *Session) heartbeats(ctx context.Context) {
	t := time.NewTimer(s.currentPeriod())
	defer t.Stop()
	defer func() {
		s.beatMu.Lock()
		defer s.beatMu.Unlock()
		s.endBeats()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.removed:
			return
		case <-s.statusChanged:
			if err := s.register(ctx); err != nil && ctx.Err() == nil && !s.noteRemoved(err) {
				s.log.Warn("registering the node's new status failed", "err", err)
			}
			continue
		case <-t.C:
		}
		// A node the managers do not know (NotFound) was removed by the
		// operator: it is not registered again behind their back.
		if err := s.heartbeat(ctx); err != nil && ctx.Err() == nil && !s.noteRemoved(err) {
			s.log.Warn("heartbeat failed", "err", err)
		}
		t.Reset(s.currentPeriod())
	}
}

func (s *Session) heartbeat(ctx context.Context) error {
	req := &legionpb.HeartbeatRequest{Node: s.cfg.Node}
	if s.cfg.Usage != nil {
		for _, u := range s.cfg.Usage() {
			req.Usage = append(req.Usage, &legionpb.TaskUsage{Namespace: u.Namespace, Task: u.Task,
				CpuMillis: int64(u.CPU), MemoryBytes: int64(u.Memory)})
		}
	}
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	// A manager that does not answer a heartbeat within half a period is
	// left for the next one (any manager passes it on to the leader): a
	// full CallTimeout on a leader cut off from this node alone would let
	// the node be taken for suspect.
	return s.writeTo(ctx, "heartbeat", s.currentPeriod()/2, func(ctx context.Context, addr string, c legionpb.DispatcherClient) error {
		r, err := s.beatTo(ctx, addr, c, req)
		if err == nil {
			s.learn(r)
			s.wakeStream()
		}
		return err
	})
}

// askStreamAgain is how many beats go as calls to a manager that had no
// heartbeat stream before one asks for it again (about five minutes at
// the default period): a manager upgraded in place keeps its address.
const askStreamAgain = 150

// beatTo sends one beat to the manager at addr: on the stream to it,
// opened if none is, or as a call to a manager without one. The caller
// holds beatMu.
func (s *Session) beatTo(ctx context.Context, addr string, c legionpb.DispatcherClient, req *legionpb.HeartbeatRequest) (*legionpb.HeartbeatResponse, error) {
	if calls, older := s.noStream[addr]; older && calls < askStreamAgain {
		s.noStream[addr] = calls + 1
		return c.Heartbeat(ctx, req)
	}
	if s.beats != nil && s.beats.addr != addr {
		s.endBeats() // beats go elsewhere now: the leader changed, or this one failed
	}
	if s.beats == nil {
		sctx, cancel := context.WithCancel(s.base)
		st, err := c.HeartbeatStream(sctx)
		if err != nil {
			cancel()
			return nil, err
		}
		s.beats = &beatStream{addr: addr, stream: st, cancel: cancel}
	}
	r, err := s.beats.beat(ctx, req)
	if err != nil || ctx.Err() != nil {
		s.endBeats() // ctx's end may have cancelled it, answer or not
	}
	if err == nil {
		delete(s.noStream, addr) // upgraded, if it was older
		return r, nil
	}
	if status.Code(err) == codes.Unimplemented {
		if _, known := s.noStream[addr]; !known {
			s.log.Info("manager has no heartbeat stream (an older version): heartbeats go to it as calls", "manager", addr)
		}
		s.noStream[addr] = 0
		return c.Heartbeat(ctx, req)
	}
	return nil, err
}

// endBeats closes the heartbeat stream, if one is open. The caller holds
// beatMu.
func (s *Session) endBeats() {
	if s.beats != nil {
		s.beats.cancel()
		s.beats = nil
	}
}

// beatStream is a heartbeat stream open to one manager.
type beatStream struct {
	addr   string
	stream legionpb.Dispatcher_HeartbeatStreamClient
	cancel context.CancelFunc // ends the stream
}

// beat sends req and waits for its answer until ctx ends, which ends the
// stream (a stream cannot wait less for one message than for the next).
// Its errors are a call's: the manager's refusal as it sent it, and
// ctx's end as DeadlineExceeded or Canceled.
func (b *beatStream) beat(ctx context.Context, req *legionpb.HeartbeatRequest) (*legionpb.HeartbeatResponse, error) {
	stop := context.AfterFunc(ctx, b.cancel)
	defer stop()
	r, err := b.exchange(req)
	if err != nil && ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err() // what cancelled the stream
	}
	return r, err
}

func (b *beatStream) exchange(req *legionpb.HeartbeatRequest) (*legionpb.HeartbeatResponse, error) {
	// A stream the manager ended says so on Send with io.EOF alone; its
	// status comes with Recv.
	if err := b.stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	r, err := b.stream.Recv()
	if errors.Is(err, io.EOF) {
		// Ended without a status: not a refusal; as a manager going away.
		return nil, status.Error(codes.Unavailable, "the manager ended the heartbeat stream")
	}
	return r, err
}

// learn takes the managers a heartbeat reply names.
func (s *Session) learn(r *legionpb.HeartbeatResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.GetManagers()) > 0 {
		// The cluster's list first; seeds stay as a last resort.
		s.addrs = dedup(append(slices.Clone(r.GetManagers()), s.cfg.Managers...))
	}
	if r.GetLeader() != "" {
		s.leader = r.GetLeader()
	}
	if p := time.Duration(r.GetPeriodMs()) * time.Millisecond; p > 0 {
		s.period = p
	}
}
