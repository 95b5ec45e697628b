package dispatcher

import (
	"context"
	"errors"
	"io"
	"maps"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// Heartbeat records that the node is alive and what its tasks use, and
// tells it where the managers are. Only the leader tracks liveness.
func (s *Service) Heartbeat(ctx context.Context, req *legionpb.HeartbeatRequest) (*legionpb.HeartbeatResponse, error) {
	id, leaf, by, err := nodeCaller(ctx, req.GetNode())
	if err != nil {
		return nil, err
	}
	st, err := s.replica()
	if err != nil {
		return nil, err
	}
	if !st.IsLeader() {
		c, fctx, err := s.relay(ctx, st, id, leaf, by)
		if err != nil {
			return nil, err
		}
		fwd := proto.Clone(req).(*legionpb.HeartbeatRequest)
		fwd.Node = id.Name
		return c.Heartbeat(fctx, fwd)
	}
	if err := s.checkCaller(ctx, st, id, leaf, by); err != nil {
		return nil, err
	}
	// The cache knows the node without decoding it; when it does not
	// (not loaded yet, or a node just registered), the replica says.
	if !s.cacheOf(st).hasNode(id.Name) {
		if _, _, err := st.Get(legion.KindNode, "", id.Name); errors.Is(err, store.ErrNotFound) {
			// Deleted, or never registered: the agent registers again.
			return nil, status.Errorf(codes.NotFound, "node %s is not registered: register first", id.Name)
		} else if err != nil {
			return nil, s.statusOf(err)
		}
	}
	s.beat(id.Name, req.GetUsage())
	leader, managers := s.peers()
	return &legionpb.HeartbeatResponse{Managers: managers, Leader: leader, PeriodMs: legion.HeartbeatPeriod.Milliseconds()}, nil
}

// HeartbeatStream answers a node's heartbeats on one stream, each as Heartbeat
// answers it, with the same checks per beat: a node removed, a
// certificate revoked or a manager that stops leading ends the stream
// with Heartbeat's refusal, which the agent takes as it takes a call's.
// A relayed beat waits no longer than the stream: the agent ends it when
// a beat goes unanswered.
func (s *Service) HeartbeatStream(stream legionpb.Dispatcher_HeartbeatStreamServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.Heartbeat(ctx, req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// beat records a heartbeat; usage replaces the node's last report when
// given.
func (s *Service) beat(node string, usage []*legionpb.TaskUsage) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beats[node] = now
	if usage == nil {
		return
	}
	us := make([]legion.Usage, 0, len(usage))
	for _, u := range usage {
		us = append(us, legion.Usage{Namespace: u.GetNamespace(), Task: u.GetTask(), Node: node, Time: now,
			CPU: legion.CPU(u.GetCpuMillis()), Memory: legion.Bytes(u.GetMemoryBytes())})
	}
	s.usage[node] = us
}

// Heartbeats implements controller.Signals: when each node was last heard
// from by this manager.
func (s *Service) Heartbeats() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.beats)
}

// Usage implements controller.Signals: every node's last usage report.
func (s *Service) Usage() []legion.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []legion.Usage
	for _, us := range s.usage {
		out = append(out, us...)
	}
	return out
}
