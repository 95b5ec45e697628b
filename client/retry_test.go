package client_test

import (
	"context"
	"errors"
	"github.com/legionbsd/legion/internal/grpcpings"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// objectsServer answers Apply and Get with the errors a test scripts,
// then with success, counting the calls.
type objectsServer struct {
	pb.UnimplementedObjectsServer
	fail func() error // the answer of the first call of each method

	mu    sync.Mutex
	calls map[string]int
}

func (o *objectsServer) call(method string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.calls == nil {
		o.calls = map[string]int{}
	}
	o.calls[method]++
	if o.calls[method] == 1 {
		return o.fail()
	}
	return nil
}

func (o *objectsServer) count(method string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[method]
}

// stored is the object the fake store holds.
func stored() *pb.Object {
	return &pb.Object{ApiVersion: legion.APIVersion, Kind: string(legion.KindConfig),
		Metadata: &pb.Metadata{Name: "a", Namespace: "default", Version: 7}, Spec: []byte(`{"text":"x"}`)}
}

func (o *objectsServer) Apply(context.Context, *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	if err := o.call("apply"); err != nil {
		return nil, err
	}
	return &pb.ApplyResponse{Results: []*pb.ApplyResult{{Object: stored(), Outcome: "created"}}}, nil
}

func (o *objectsServer) Get(context.Context, *pb.GetRequest) (*pb.GetResponse, error) {
	if err := o.call("get"); err != nil {
		return nil, err
	}
	return &pb.GetResponse{Object: stored()}, nil
}

// A write whose manager failed while it was under way may have applied:
// it is not sent again (it could apply twice, the second time over a
// later write), and the error says so. A write refused before it could
// apply (RetryInfo) is sent again, and a read always is.
func TestWritesAreSentAgainOnlyWhenTheyCannotHaveApplied(t *testing.T) {
	t.Parallel()
	ambiguous := func() error {
		return status.Error(codes.Unavailable, "no quorum: leadership lost during the write: the write may still apply")
	}
	refused := retryableFailure(t, "no leader: an election is in progress")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	o := &objectsServer{fail: ambiguous}
	c := serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	_, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{})
	if err == nil || client.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "may or may not have been made") ||
		!errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("a write whose outcome is unknown: %v", err)
	}
	if n := o.count("apply"); n != 1 {
		t.Fatalf("a write whose outcome is unknown was sent %d times", n)
	}
	if _, err := c.Get(ctx, legion.KindConfig, "default", "a"); err != nil || o.count("get") != 2 {
		t.Fatalf("a read after UNAVAILABLE: %v, sent %d times", err, o.count("get"))
	}
	o = &objectsServer{fail: ambiguous}
	c = serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	if _, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{DryRun: true}); err != nil || o.count("apply") != 2 {
		t.Fatalf("a dry run after UNAVAILABLE (it changes nothing): %v, sent %d times", err, o.count("apply"))
	}

	o = &objectsServer{fail: refused}
	c = serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	if _, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{}); err != nil || o.count("apply") != 2 {
		t.Fatalf("a write refused before it could apply: %v, sent %d times", err, o.count("apply"))
	}
}

// A manager that could not reach the leader to forward a write (the
// leader's address answered with another cluster's certificate) says to
// ask again, and the client does, though the failure names a handshake:
// a handshake failure the manager does not mark so (the client's own, as
// far as the client can tell) is not asked again, since asking cannot
// fix it.
func TestAHandshakeTheManagerMetForwardingIsAskedAgain(t *testing.T) {
	t.Parallel()
	const msg = `reaching the manager at 127.0.0.1:1: connection error: desc = "transport: authentication handshake failed: the server's certificate is not from this cluster's CA"`
	forwarding := retryableFailure(t, msg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := &objectsServer{fail: forwarding}
	c := serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	if _, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{}); err != nil || o.count("apply") != 2 {
		t.Fatalf("a write the manager could not forward: %v, sent %d times", err, o.count("apply"))
	}

	o = &objectsServer{fail: func() error { return status.Error(codes.Unavailable, msg) }}
	c = serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	if _, err := c.Get(ctx, legion.KindConfig, "default", "a"); err == nil || o.count("get") != 1 {
		t.Fatalf("a read failing on a handshake, not marked to ask again: %v, sent %d times", err, o.count("get"))
	}
}

// retryableFailure is a scripted failure that a manager marks as safe to ask
// again: UNAVAILABLE with a RetryInfo, saying msg.
func retryableFailure(t *testing.T, msg string) func() error {
	return func() error {
		st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{})
		if err != nil {
			t.Error(err)
		}
		return st.Err()
	}
}

// The client keeps gRPC's flow-control windows fixed: with its default
// ones, nearly every answer made the client ping the manager, and the
// manager answer the ping.
func TestClientSendsNoPings(t *testing.T) {
	t.Parallel()
	var count grpcpings.Counter
	o := &objectsServer{fail: func() error { return nil }}
	c := serveCounted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second, &count)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 20 {
		if _, err := c.Get(ctx, legion.KindConfig, "default", "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := o.count("get"); n != 20 {
		t.Fatalf("the manager answered %d reads, want 20", n)
	}
	if n := count.Pings(); n != 0 {
		t.Errorf("the client sent %d pings over twenty reads, want none", n)
	}
}
