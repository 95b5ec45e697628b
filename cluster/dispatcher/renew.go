package dispatcher

import (
	"context"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Renew issues the calling node a certificate for the key of its request,
// naming exactly whoever the calling certificate names, so a renewal can
// change neither a node's name nor its role. Any manager answers: each
// holds the CA.
func (s *Service) Renew(ctx context.Context, req *legionpb.RenewRequest) (*legionpb.RenewResponse, error) {
	id, err := caller(ctx, "")
	if err != nil {
		return nil, err
	}
	if s.issue == nil {
		return nil, status.Error(codes.Unavailable, "this daemon issues no certificates: ask another manager")
	}
	cert, err := s.issue(req.GetCsr(), id)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "renewing the certificate of node %s: %v", id.Name, err)
	}
	s.log.Info("node certificate renewed", "node", id.Name, "role", id.Role)
	return &legionpb.RenewResponse{Certificate: cert}, nil
}
