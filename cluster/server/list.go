package server

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// listPart is about how many bytes of objects one ListStream message
// carries: a list of any length travels (List's one message stops at
// MaxMessage), and each part is a bounded allocation on both ends. An
// object larger than a part goes alone, which legion.MaxObjectSize keeps
// far below MaxMessage.
const listPart = 4 << 20

// List answers the whole list in one message; a list larger than a
// message may be is refused with what to use instead.
func (o *objectsService) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	out := &pb.ListResponse{}
	err := o.list(ctx, req, func(part *pb.ListResponse) error {
		out.Version = part.Version
		out.Objects = append(out.Objects, part.Objects...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n := proto.Size(out); n > MaxMessage {
		return nil, status.Errorf(codes.ResourceExhausted,
			"listing %s: %d objects take %d MiB, more than one message may carry (%d MiB); a client of this version takes the list in parts (ListStream)",
			req.Kind, len(out.Objects), n>>20, MaxMessage>>20)
	}
	return out, nil
}

// ListStream answers the list in parts of about listPart bytes.
func (o *objectsService) ListStream(req *pb.ListRequest, stream grpc.ServerStreamingServer[pb.ListResponse]) error {
	return o.list(stream.Context(), req, stream.Send)
}

// list reads a list on the leader (a follower passes the request on) and
// hands it to send in parts, every part with the version the list was
// read at; an empty list is one part without objects.
func (o *objectsService) list(ctx context.Context, req *pb.ListRequest, send func(*pb.ListResponse) error) error {
	kind, ns, err := scope(req.Kind, req.Namespace, req.AllNamespaces)
	if err != nil {
		return err
	}
	a, err := o.s.accessOf(ctx)
	if err != nil {
		return err
	}
	// One namespace must be readable; across namespaces a user sees only
	// what it may read.
	if !filtersList(kind, ns) {
		if err := a.check(rbac.Read, kind, ns); err != nil {
			return err
		}
	}
	st, conn, fctx, err := o.s.leader(ctx)
	if err != nil {
		return err
	}
	if conn != nil {
		answered := false
		relay := func(part *pb.ListResponse) error {
			answered = true
			if a != nil {
				part.Objects = slices.DeleteFunc(part.Objects, func(p *pb.Object) bool {
					m := p.GetMetadata()
					return a.checkNamed(rbac.Read, kind, m.GetNamespace(), m.GetName()) != nil
				})
			}
			return send(part)
		}
		err := listFrom(fctx, pb.NewObjectsClient(conn), req, relay)
		if readAgain(ctx, err, answered) {
			if _, again, actx, lerr := o.s.leader(ctx); lerr == nil && again != nil {
				err = listFrom(actx, pb.NewObjectsClient(again), req, relay)
			}
		}
		return err
	}
	if err := st.Barrier(ctx); err != nil {
		return toStatus(err)
	}
	objs, at, err := st.List(kind, ns, func(x legion.Object) bool { return visible(x, req.Labels) && a.readable(x) })
	if err != nil {
		return toStatus(err)
	}
	part, size := &pb.ListResponse{Version: at}, 0
	for _, x := range objs {
		p, err := pb.ToProto(x)
		if err != nil {
			return toStatus(err)
		}
		n := proto.Size(p)
		if len(part.Objects) > 0 && size+n > listPart {
			if err := send(part); err != nil {
				return err
			}
			part, size = &pb.ListResponse{Version: at}, 0
		}
		part.Objects = append(part.Objects, p)
		size += n
	}
	return send(part)
}

// listFrom takes a list from the leader in parts: its ListStream, or the
// one message of List from a leader of a version without ListStream.
func listFrom(ctx context.Context, leader pb.ObjectsClient, req *pb.ListRequest, send func(*pb.ListResponse) error) error {
	parts, err := leader.ListStream(ctx, req)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		part, err := parts.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case first && status.Code(err) == codes.Unimplemented:
			whole, err := leader.List(ctx, req)
			if err != nil {
				return err
			}
			return send(whole)
		case err != nil:
			return err
		}
		if err := send(part); err != nil {
			return err
		}
	}
}
