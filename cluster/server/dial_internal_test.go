package server

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/grpcpings"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A manager's connections to the others keep gRPC's flow-control windows
// fixed: with its default ones, nearly every answer (to a forwarded
// write, an append, a heartbeat) made the manager ping the other, and
// the other answer the ping.
func TestManagersDialSendNoPings(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	addr, count := grpcpings.ServeHealth(t, credentials.NewTLS(dispatchertest.Credentials(t, ca, "m2", pki.RoleManager).ServerConfig()))
	s := &Server{creds: dispatchertest.Credentials(t, ca, "m1", pki.RoleManager)}
	conn, err := s.dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	for range 20 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := count.Pings(); n != 0 {
		t.Errorf("a manager sent %d pings to another over twenty calls, want none", n)
	}
}
