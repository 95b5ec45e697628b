package server

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// A locked manager takes Unlock from its own host only and refuses the
// rest, naming the lock; agents and managers are told to go elsewhere.
func TestAuthorizeLocked(t *testing.T) {
	t.Parallel()
	s := &Server{state: roleLocked}
	at := func(ip string) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 4000}})
	}
	for _, c := range []struct {
		ip, method string
		want       codes.Code
	}{
		{"127.0.0.1", unlockMethod, codes.OK},
		{"::1", unlockMethod, codes.OK},
		{"192.0.2.7", unlockMethod, codes.PermissionDenied},
		{"127.0.0.1", "/legion.v1.Objects/Get", codes.FailedPrecondition},
		{"127.0.0.1", "/legion.v1.Cluster/Status", codes.FailedPrecondition},
		{"127.0.0.1", "/legion.v1.Cluster/Init", codes.FailedPrecondition},
		{"192.0.2.7", "/legion.v1.Raft/AppendEntries", codes.Unavailable},
		{"192.0.2.7", "/legion.v1.Dispatcher/Register", codes.Unavailable},
	} {
		_, err := s.authorize(at(c.ip), c.method)
		if got := status.Code(err); got != c.want {
			t.Errorf("%s from %s: %v, want %v", c.method, c.ip, err, c.want)
		}
		if c.want == codes.FailedPrecondition && status.Convert(err).Message() != lockedMsg {
			t.Errorf("%s: message %q, want %q", c.method, status.Convert(err).Message(), lockedMsg)
		}
	}
}
