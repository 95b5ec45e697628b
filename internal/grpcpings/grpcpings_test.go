package grpcpings_test

import (
	"context"
	"testing"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/grpcpings"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// pingsOver counts the pings a client dialled with opts sends over
// twenty calls, each answered with data.
func pingsOver(t *testing.T, opts ...grpc.DialOption) int64 {
	t.Helper()
	ca := dispatchertest.NewCA(t)
	addr, count := grpcpings.ServeHealth(t, credentials.NewTLS(dispatchertest.Credentials(t, ca, "m1", pki.RoleManager).ServerConfig()))
	node := dispatchertest.Credentials(t, ca, "w1", pki.RoleWorker)
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(node.ClientConfig())))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for range 20 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	return count.Pings()
}

// gRPC's default windows ping the server as answers arrive; fixed ones
// never do. The first half shows the counter counts.
func TestFixedWindowsSendNoPings(t *testing.T) {
	if n := pingsOver(t); n == 0 {
		t.Error("a client with gRPC's default windows sent no ping over twenty calls: the counter counts nothing")
	}
	if n := pingsOver(t, legionpb.FixedWindows()...); n != 0 {
		t.Errorf("a client with fixed windows sent %d pings over twenty calls, want none", n)
	}
}
