package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (o *objectsServer) List(context.Context, *pb.ListRequest) (*pb.ListResponse, error) {
	if err := o.call("list"); err != nil {
		return nil, err
	}
	return &pb.ListResponse{Objects: []*pb.Object{stored()}, Version: 7}, nil
}

// partsServer answers ListStream in two parts (after the scripted first
// answer), and List as a manager of any version does.
type partsServer struct{ objectsServer }

func (o *partsServer) ListStream(_ *pb.ListRequest, s grpc.ServerStreamingServer[pb.ListResponse]) error {
	if err := o.call("parts"); err != nil {
		return err
	}
	a, b := stored(), stored()
	b.Metadata.Name = "b"
	if err := s.Send(&pb.ListResponse{Objects: []*pb.Object{a}, Version: 9}); err != nil {
		return err
	}
	return s.Send(&pb.ListResponse{Objects: []*pb.Object{b}, Version: 9})
}

func names(objs []legion.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetMetadata().Name)
	}
	return out
}

// A list comes in parts, asked again after UNAVAILABLE as every read is;
// from a manager of a version without ListStream it comes in List's one
// message.
func TestListTakesPartsOrTheWholeMessage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := func() error { return status.Error(codes.Unavailable, "no leader: an election is in progress") }
	o := &partsServer{objectsServer{fail: refused}}
	c := serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, o) }, 10*time.Second)
	list, version, err := c.List(ctx, legion.KindConfig, client.ListOptions{})
	if err != nil || len(list) != 2 || names(list)[0] != "a" || names(list)[1] != "b" || version != 9 {
		t.Fatalf("a list in two parts: %v at %d, %v; want [a b] at 9", names(list), version, err)
	}
	if o.count("parts") != 2 || o.count("list") != 0 {
		t.Fatalf("ListStream asked %d times (once refused), List %d; want 2 and 0", o.count("parts"), o.count("list"))
	}

	old := &objectsServer{fail: func() error { return nil }}
	c = serveScripted(t, func(g *grpc.Server) { pb.RegisterObjectsServer(g, old) }, 10*time.Second)
	list, version, err = c.List(ctx, legion.KindConfig, client.ListOptions{})
	if err != nil || len(list) != 1 || names(list)[0] != "a" || version != 7 || old.count("list") != 1 {
		t.Fatalf("a list from a manager without ListStream: %v at %d, %v (List asked %d times); want [a] at 7, once",
			names(list), version, err, old.count("list"))
	}
}
