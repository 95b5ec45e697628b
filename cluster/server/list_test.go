package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A list larger than one message may be comes whole, from the leader and
// through a follower: every object once, in name order, at one version.
// List's single message refuses it and says what to use instead.
func TestListLargerThanAMessage(t *testing.T) {
	t.Parallel()
	ms, c := threeManagers(t)
	defer stopAll(ms)
	ctx := context.Background()
	// Configs near their size limit, enough of them to pass MaxMessage.
	text := strings.Repeat("x", legion.MaxValueSize-1024)
	n := MaxMessage/len(text) + 2
	var last uint64
	for i := range n {
		// A megabyte's entries, fsynced by three managers on a loaded
		// machine, can outlast the test timing's leader lease.
		r, err := applyAgain(t, c, configObj("default", fmt.Sprintf("big-%03d", i), text))
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		last = r.Object.GetMetadata().Version
	}
	lead := leaderOf(t, ms)
	for _, m := range ms[:2] {
		via := "a follower"
		if m == lead {
			via = "the leader"
		}
		list, version, err := adminClient(t, m.addr, ms[0].dir).List(ctx, legion.KindConfig, client.ListOptions{})
		if err != nil {
			t.Fatalf("list through %s: %v", via, err)
		}
		if len(list) != n || version < last {
			t.Fatalf("list through %s: %d objects at version %d, want %d at %d or later", via, len(list), version, n, last)
		}
		for i, o := range list {
			cfg := o.(*legion.Config)
			if want := fmt.Sprintf("big-%03d", i); cfg.Metadata.Name != want || string(cfg.Spec.Data) != text {
				t.Fatalf("list through %s: object %d is %s with %d bytes, want %s with %d", via, i, cfg.Metadata.Name, len(cfg.Spec.Data), want, len(text))
			}
		}
	}

	creds, err := pki.LoadBundle(filepath.Join(ms[0].dir, AdminFile))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(lead.addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(2*MaxMessage)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pb.NewObjectsClient(conn).List(ctx, &pb.ListRequest{Kind: string(legion.KindConfig)})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "ListStream") {
		t.Fatalf("List of %d objects of 500 KiB: %v, want RESOURCE_EXHAUSTED naming ListStream", n, err)
	}
	// The parts: each of about listPart bytes, all at one version.
	parts, err := pb.NewObjectsClient(conn).ListStream(ctx, &pb.ListRequest{Kind: string(legion.KindConfig)})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	objects, version := 0, uint64(0)
	for {
		part, err := parts.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if version != 0 && part.Version != version {
			t.Fatalf("parts at versions %d and %d", version, part.Version)
		}
		version = part.Version
		objects += len(part.Objects)
		sizes = append(sizes, proto.Size(part))
		if one := proto.Size(part.Objects[0]); proto.Size(part) > listPart+one {
			t.Fatalf("a part of %d bytes, more than listPart (%d) and one object (%d)", proto.Size(part), listPart, one)
		}
	}
	if objects != n || len(sizes) < MaxMessage/listPart {
		t.Fatalf("ListStream: %d objects in parts of %v bytes, want %d in at least %d parts", objects, sizes, n, MaxMessage/listPart)
	}
}

// oldLeader is a leader of a version without ListStream.
type oldLeader struct {
	pb.ObjectsClient // only List and ListStream are called
	lists            int
}

type unimplementedParts struct {
	grpc.ServerStreamingClient[pb.ListResponse]
}

func (unimplementedParts) Recv() (*pb.ListResponse, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method ListStream for service legion.v1.Objects")
}

func (l *oldLeader) ListStream(context.Context, *pb.ListRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.ListResponse], error) {
	return unimplementedParts{}, nil
}

func (l *oldLeader) List(context.Context, *pb.ListRequest, ...grpc.CallOption) (*pb.ListResponse, error) {
	l.lists++
	return &pb.ListResponse{Objects: []*pb.Object{{Kind: string(legion.KindConfig)}}, Version: 5}, nil
}

// A follower takes a list from a leader of a version without ListStream
// in List's one message.
func TestListFromALeaderWithoutParts(t *testing.T) {
	t.Parallel()
	l := &oldLeader{}
	var got []*pb.ListResponse
	err := listFrom(context.Background(), l, &pb.ListRequest{Kind: string(legion.KindConfig)}, func(p *pb.ListResponse) error {
		got = append(got, p)
		return nil
	})
	if err != nil || len(got) != 1 || len(got[0].Objects) != 1 || got[0].Version != 5 || l.lists != 1 {
		t.Fatalf("list from an old leader: %v, %d parts, List asked %d times; want one part at version 5, List once", err, len(got), l.lists)
	}
}
