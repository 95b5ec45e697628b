package dispatcher

import (
	"context"
	"fmt"

	"github.com/legionbsd/legion/cluster/pki"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Renew issues the calling node a certificate for the key of its request,
// naming exactly whoever the calling certificate names, so a renewal can
// change neither a node's name nor its role. Only a certificate the
// cluster issued that node is renewed, and only by the leader, which
// records the new certificate for the node before handing it out.
func (s *Service) Renew(ctx context.Context, req *legionpb.RenewRequest) (*legionpb.RenewResponse, error) {
	id, leaf, err := caller(ctx, "")
	if err != nil {
		return nil, err
	}
	if s.issue == nil {
		return nil, status.Error(codes.Unavailable, "this daemon issues no certificates: ask another manager")
	}
	st, err := s.leaderStore()
	if err != nil {
		return nil, err
	}
	if err := s.holds(ctx, st, id, leaf, true); err != nil {
		return nil, err
	}
	cert, err := s.issue(req.GetCsr(), id)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "renewing the certificate of node %s: %v", id.Name, err)
	}
	parsed, err := pki.ParseCert(cert)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "renewing the certificate of node %s: %v", id.Name, err)
	}
	if err := RecordCert(ctx, st, parsed, false); err != nil {
		return nil, s.statusOf(fmt.Errorf("node %s: recording its renewed certificate: %w", id.Name, err))
	}
	s.log.Info("node certificate renewed", "node", id.Name, "role", id.Role, "serial", parsed.SerialNumber.Text(16))
	return &legionpb.RenewResponse{Certificate: cert}, nil
}
