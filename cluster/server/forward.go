package server

import (
	"context"
	"strings"

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

// unreached turns the failure of a call to another manager that never
// left this one (no connection could be made to it: the dial or the TLS
// handshake failed) into notApplied, naming the manager. As gRPC words
// it, it is the connection's own error: relayed as it is to the client
// whose call this manager forwarded, it read as that client's failure
// (a handshake refused, which asking again cannot fix), so the client
// gave up where the next election would have answered it, such as when
// a dead leader's address now answers for another cluster.
func unreached(addr string, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || !neverSent(st.Message()) {
		return err
	}
	return notApplied("reaching the manager at %s: %s", addr, st.Message())
}

// neverSent reports whether a gRPC UNAVAILABLE message is that of a
// connection that was never made (grpc-go's transport words), so the
// call was not sent.
func neverSent(msg string) bool {
	const prefix = `connection error: desc = "transport: `
	rest, ok := strings.CutPrefix(msg, prefix)
	return ok && (strings.HasPrefix(rest, "Error while dialing") || strings.HasPrefix(rest, "authentication handshake failed"))
}

// peerCallOptions give the calls made on a connection to another manager
// unreached's errors.
func peerCallOptions(addr string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return unreached(addr, invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			return cs, unreached(addr, err)
		}),
	}
}
