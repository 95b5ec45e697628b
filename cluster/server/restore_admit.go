package server

import (
	"context"

	"github.com/legionbsd/legion"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// admitRestore admits the Volume a restore makes as an apply of it by
// the same caller would be: the namespace's quotas (volumes, storage,
// objects) and the checks a Volume passes. With write set, it writes
// while no other apply is admitted, so the two cannot both take the last
// of a quota. It runs on the leader, as restores do.
func (s *Server) admitRestore(ctx context.Context, v *legion.Volume, write func() error) error {
	st := s.store()
	if st == nil {
		return status.Error(codes.Unavailable, "this daemon is not a manager yet")
	}
	a, err := s.accessOf(ctx)
	if err != nil {
		return err
	}
	s.admit.Lock()
	defer s.admit.Unlock()
	if _, err := admitCluster(st, []applyItem{{obj: v}}, a != nil); err != nil {
		return err
	}
	if write == nil {
		return nil
	}
	return write()
}
