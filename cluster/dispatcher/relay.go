package dispatcher

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/metadata"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// A node's heartbeats and reports go to whichever manager it reaches; a
// follower passes them on to the leader (3.2), so a node cut off from the
// leader alone stays alive and its tasks stay where they are.

// nodeCaller is who a heartbeat or report is for. A call a follower relayed
// comes with a manager's certificate, the forwarded mark and the node's
// name; the follower checked the node's certificate, and the leader takes
// its word (managers hold the cluster's state anyway) once the manager's
// own certificate holds (see checkCaller). by is that manager, nil for a
// node's own call.
func nodeCaller(ctx context.Context, asked string) (id pki.Identity, leaf *x509.Certificate, by *relayer, err error) {
	if asked != "" && forwardedCall(ctx) {
		mid, mleaf, err := caller(ctx, "")
		if err != nil {
			return pki.Identity{}, nil, nil, err
		}
		if mid.Role == pki.RoleManager {
			return pki.Identity{Name: asked, Role: pki.RoleWorker}, nil, &relayer{mid, mleaf}, nil
		}
	}
	id, leaf, err = caller(ctx, asked)
	return id, leaf, nil, err
}

// relayer is the manager that relayed a node's call.
type relayer struct {
	id   pki.Identity
	leaf *x509.Certificate
}

// checkCaller checks, on the leader, the certificate of whoever made a
// node's call: the node's own (adopting it when the node has no record),
// or the relaying manager's, which a removed manager's fails.
func (s *Service) checkCaller(ctx context.Context, st *store.Store, id pki.Identity, leaf *x509.Certificate, by *relayer) error {
	if by != nil {
		return s.holdsStill(ctx, st, by.id, by.leaf, false)
	}
	return s.holdsStill(ctx, st, id, leaf, true)
}

func forwardedCall(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, legionpb.ForwardedKey)) > 0
}

// relay is the connection to pass a node's call on to the leader, after
// checking the node's certificate against this replica. A call relayed once
// already, or a manager with no way to the leader, is refused naming the
// leader, as before.
func (s *Service) relay(ctx context.Context, st *store.Store, id pki.Identity, leaf *x509.Certificate, by *relayer) (legionpb.DispatcherClient, context.Context, error) {
	if by != nil || s.lead == nil {
		leader, _ := s.peers()
		return nil, nil, notLeader(leader)
	}
	if err := s.holdsStill(ctx, st, id, leaf, false); err != nil {
		return nil, nil, err
	}
	conn, fctx, err := s.lead(ctx)
	if err != nil {
		return nil, nil, err
	}
	if conn == nil { // this manager took the lead meanwhile: the node calls again
		leader, _ := s.peers()
		return nil, nil, notLeader(leader)
	}
	return legionpb.NewDispatcherClient(conn), fctx, nil
}
