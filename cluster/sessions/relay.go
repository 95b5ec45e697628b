package sessions

import (
	"context"
	"errors"
	"io"
	"sync"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attached is a session joined to its agent's Attach stream.
type attached struct {
	s     *Service
	ss    *session
	node  string
	agent legionpb.Sessions_AttachServer

	mu   sync.Mutex
	over bool
}

// attach offers o to the node's agent and waits for its Attach. The
// caller leaving, or the manager stopping, ends the agent's side: Attach
// returns, which cancels the agent's stream and so any Recv on it. close
// ends the session.
func (s *Service) attach(ctx context.Context, node string, o *legionpb.SessionOffer) (*attached, error) {
	ss, err := s.offer(ctx, node, o)
	if err != nil {
		return nil, err
	}
	agent, err := s.waitAttach(ctx, ss)
	if err != nil {
		s.forget(ss)
		return nil, err
	}
	stop := context.AfterFunc(ctx, ss.finish)
	a := &attached{s: s, ss: ss, node: node, agent: agent}
	go func() { <-ss.done; stop() }()
	return a, nil
}

// close ends the session; sends after it are dropped, as the agent's
// stream is not to be used once its handler returned.
func (a *attached) close() {
	a.mu.Lock()
	a.over = true
	a.mu.Unlock()
	a.s.forget(a.ss)
}

// send relays input to the agent; one sender at a time.
func (a *attached) send(in *legionpb.AttachInput) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.over {
		return io.EOF
	}
	return a.agent.Send(in)
}

// relay hands each message the agent sends to handle until the agent ends
// the session (nil), sends an error (its code and message), or the stream
// breaks (the caller's cancellation, the manager stopping, or UNAVAILABLE).
func (a *attached) relay(ctx context.Context, handle func(*legionpb.AttachOutput) error) error {
	for {
		m, err := a.agent.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			select {
			case <-a.s.stopped():
				return errStopping
			default:
			}
			return status.Errorf(codes.Unavailable, "the agent of node %s dropped the session: %v", a.node, err)
		}
		if m.Error != nil {
			return status.Error(codes.Code(m.Error.Code), m.Error.Message)
		}
		if err := handle(m); err != nil {
			return err
		}
	}
}
