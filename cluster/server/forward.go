package server

import (
	"context"

	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// forwardedKey marks a call a follower passed to the leader, so it is
// never passed on twice.
const forwardedKey = legionpb.ForwardedKey

func forwarded(ctx context.Context) bool {
	// ValueFromIncomingContext looks the key up where FromIncomingContext
	// would copy every header of the call first.
	return len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0
}

// leader returns the store when this manager leads, or a connection to
// the leader to forward the call to.
func (s *Server) leader(ctx context.Context) (*store.Store, *grpc.ClientConn, context.Context, error) {
	st := s.store()
	if st == nil {
		return nil, nil, nil, s.notServing(s.role())
	}
	if st.IsLeader() {
		return st, nil, ctx, nil
	}
	if forwarded(ctx) {
		return nil, nil, nil, notApplied("not the leader (this call was forwarded once already)")
	}
	addr, id := st.Leader()
	if addr == "" {
		return nil, nil, nil, s.noLeader(ctx, st)
	}
	conn, err := s.peer(addr)
	if err != nil {
		return nil, nil, nil, notApplied("reaching the leader at %s: %v", addr, err)
	}
	noteLeader(ctx, id) // the leader decides: its name goes in the audit event
	kv := []string{forwardedKey, s.nodeID}
	if u := userOf(ctx); u != nil {
		// The call goes on under this manager's certificate: the
		// leader must still decide it as the user's.
		kv = append(kv, forwardedUserKey, u.Name)
	}
	return nil, conn, metadata.AppendToOutgoingContext(ctx, kv...), nil
}

// readAgain reports whether a read this follower forwarded should be
// asked once more: it failed as the connection to the leader closed under
// it (Unavailable) before anything of its answer came back. A CA
// rotation ends by closing the connections of certificates no longer
// trusted, this follower's first one to the leader among them; a read
// may be asked twice, and the next call dials again.
func readAgain(ctx context.Context, err error, answered bool) bool {
	return err != nil && !answered && status.Code(err) == codes.Unavailable && ctx.Err() == nil
}

// forwardedUserKey: see legionpb.ForwardedUserKey.
const forwardedUserKey = legionpb.ForwardedUserKey

// forwardedUser is the user a manager forwarded a call for, if any.
func forwardedUser(ctx context.Context) (string, bool) {
	v := metadata.ValueFromIncomingContext(ctx, forwardedUserKey)
	if len(v) != 1 || v[0] == "" || !forwarded(ctx) {
		return "", false
	}
	return v[0], true
}
