package server

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/metrics"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc"
)

// ack records what a follower acknowledged of the log.
func (t *transport) ack(target raft.ServerAddress, r *raft.AppendEntriesResponse) {
	if !r.Success {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.acked == nil {
		t.acked = map[raft.ServerAddress]uint64{}
	}
	t.acked[target] = r.LastLog
}

// acknowledged is the last log index each follower acknowledged, by
// address.
func (t *transport) acknowledged() map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]uint64, len(t.acked))
	for a, i := range t.acked {
		out[string(a)] = i
	}
	return out
}

// metricsSource is what the manager's collectors read: the store until
// shutdown begins (so a scrape never reaches a closing store), and the
// followers' acknowledged indexes.
func (s *Server) metricsSource() metrics.Source {
	return metrics.Source{
		Store: func() *store.Store {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.stopped || s.state != roleManager {
				return nil
			}
			return s.st
		},
		Followers: func() map[string]uint64 {
			s.mu.Lock()
			tr := s.tr
			s.mu.Unlock()
			if tr == nil {
				return nil
			}
			return tr.acknowledged()
		},
	}
}

// callOptions are the chains every call goes through: metrics first (when
// asked for), so refusals by audit and authentication are counted too.
// With metrics, calls to methods the server does not have reach the
// metrics' interceptor too (gRPC answers them before any interceptor
// otherwise), which counts and refuses them as gRPC would.
func (s *Server) callOptions() ([]grpc.ServerOption, error) {
	unary := []grpc.UnaryServerInterceptor{s.unaryAudit, s.unaryAuth}
	stream := []grpc.StreamServerInterceptor{s.streamAudit, s.streamAuth}
	if s.cfg.Metrics == nil {
		return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}, nil
	}
	g, err := metrics.NewManager(s.cfg.Metrics, s.metricsSource())
	if err != nil {
		return nil, fmt.Errorf("registering the manager's metrics: %w", err)
	}
	var known sync.Once
	var methods map[string]bool
	g.Known = func(fullMethod string) bool {
		known.Do(func() { methods = metrics.Methods(s.grpc.GetServiceInfo()) })
		return methods[fullMethod]
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{g.Unary}, unary...)...),
		grpc.ChainStreamInterceptor(append([]grpc.StreamServerInterceptor{g.Stream}, stream...)...),
		grpc.UnknownServiceHandler(metrics.Unimplemented),
	}, nil
}
