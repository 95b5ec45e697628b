package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outcomes of an apply.
const (
	Created   = "created"
	Updated   = "updated"
	Unchanged = "unchanged"
)

// Result is the answer for one applied object.
type Result struct {
	// Object is the object as stored (or as it would be, for a dry run);
	// after a Brief apply, its kind and metadata only.
	Object   legion.Object
	Outcome  string        // Created, Updated or Unchanged
	Previous legion.Object // what was stored before, if anything; nil after a Brief apply
}

// ApplyOptions qualify an apply.
type ApplyOptions struct {
	DryRun bool
	// ExpectedVersion, when set, makes the apply of each object fail with
	// ErrAborted unless it is stored at that version (0: must not exist).
	ExpectedVersion *uint64
	// Brief asks for an answer without the objects' bodies: each Result's
	// Object has its kind and its metadata as stored (uid, version,
	// generation) but a zero spec and status, and Previous is nil. For a
	// caller that reports or checks the outcome only, it saves encoding,
	// sending and decoding every object twice. A manager that predates it
	// answers in full.
	Brief bool
}

// Apply applies objects server-side (namespaces first, then what
// workloads refer to, then the rest), answering in the given order.
func (c *Client) Apply(ctx context.Context, objs []legion.Object, opts ApplyOptions) ([]Result, error) {
	req := &pb.ApplyRequest{DryRun: opts.DryRun, Brief: opts.Brief}
	for _, o := range objs {
		p, err := pb.ToProto(o)
		if err != nil {
			return nil, err
		}
		req.Items = append(req.Items, &pb.ApplyItem{Object: p, ExpectedVersion: opts.ExpectedVersion})
	}
	resp, err := c.objects.Apply(ctx, req)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]Result, 0, len(resp.Results))
	for _, r := range resp.Results {
		res := Result{Outcome: r.Outcome}
		if res.Object, err = pb.FromProto(r.Object); err != nil {
			return nil, err
		}
		if r.Previous != nil {
			if res.Previous, err = pb.FromProto(r.Previous); err != nil {
				return nil, err
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// ApplyOne applies one object.
func (c *Client) ApplyOne(ctx context.Context, o legion.Object, opts ApplyOptions) (Result, error) {
	rs, err := c.Apply(ctx, []legion.Object{o}, opts)
	if err != nil {
		return Result{}, err
	}
	if len(rs) != 1 {
		return Result{}, fmt.Errorf("apply: %d results for one object", len(rs))
	}
	return rs[0], nil
}

// Get reads one object (linearizable). The namespace of a namespaced
// kind defaults to "default".
func (c *Client) Get(ctx context.Context, kind legion.Kind, namespace, name string) (legion.Object, error) {
	resp, err := c.objects.Get(ctx, &pb.GetRequest{Kind: string(kind), Namespace: namespace, Name: name})
	if err != nil {
		return nil, wrap(err)
	}
	return pb.FromProto(resp.Object)
}

// GetAs reads one object as its Go type.
func GetAs[T legion.Object](ctx context.Context, c *Client, kind legion.Kind, namespace, name string) (T, error) {
	var zero T
	o, err := c.Get(ctx, kind, namespace, name)
	if err != nil {
		return zero, err
	}
	t, ok := o.(T)
	if !ok {
		return zero, fmt.Errorf("%s %s: got a %T", kind, name, o)
	}
	return t, nil
}

// ListOptions narrow a list or watch.
type ListOptions struct {
	Namespace     string            // default "default" for namespaced kinds
	AllNamespaces bool              // every namespace
	Labels        map[string]string // every pair must match
}

// List reads the objects of a kind (linearizable) and the version they
// were read at: Watch from it to follow the list. The list comes in parts
// (ListStream), so it may be of any length.
func (c *Client) List(ctx context.Context, kind legion.Kind, opts ListOptions) ([]legion.Object, uint64, error) {
	req := &pb.ListRequest{Kind: string(kind), Namespace: opts.Namespace, AllNamespaces: opts.AllNamespaces, Labels: opts.Labels}
	var out []legion.Object
	var version uint64
	// Asked again while the cluster answers UNAVAILABLE, as every read is.
	err := c.retryUnavailable(ctx, pb.Objects_ListStream_FullMethodName, req, nil, c.conn,
		func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			var err error
			out, version, err = c.listParts(ctx, req)
			return err
		})
	if status.Code(err) == codes.Unimplemented {
		// A manager of a version before ListStream: List's one message.
		resp, err := c.objects.List(ctx, req)
		if err != nil {
			return nil, 0, wrap(err)
		}
		out, err := appendObjects(nil, resp.Objects)
		return out, resp.Version, err
	}
	if err != nil {
		return nil, 0, wrap(err)
	}
	return out, version, nil
}

// listParts takes a list's parts as they come.
func (c *Client) listParts(ctx context.Context, req *pb.ListRequest) ([]legion.Object, uint64, error) {
	parts, err := c.objects.ListStream(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	var out []legion.Object
	var version uint64
	for {
		part, err := parts.Recv()
		if errors.Is(err, io.EOF) {
			return out, version, nil
		}
		if err != nil {
			return nil, 0, err
		}
		version = part.Version
		if out, err = appendObjects(out, part.Objects); err != nil {
			return nil, 0, err
		}
	}
}

// appendObjects decodes objects from the wire onto out.
func appendObjects(out []legion.Object, ps []*pb.Object) ([]legion.Object, error) {
	for _, p := range ps {
		o, err := pb.FromProto(p)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Delete removes an object and returns it as it was. With
// expectedVersion it fails with ErrAborted unless the object is at it.
func (c *Client) Delete(ctx context.Context, kind legion.Kind, namespace, name string, expectedVersion *uint64) (legion.Object, error) {
	resp, err := c.objects.Delete(ctx, &pb.DeleteRequest{Kind: string(kind), Namespace: namespace, Name: name,
		ExpectedVersion: expectedVersion})
	if err != nil {
		return nil, wrap(err)
	}
	return pb.FromProto(resp.Object)
}

// CheckDelete is a dry run of Delete: the cluster makes the delete's
// checks and answers with the object as the delete would leave it (a
// task placed and not stopped is told to stop rather than removed),
// changing nothing. after are the objects a dry run of several deletes
// checked before this one: the check takes them as deleted, as the
// deletes one after the other would find them. A manager that predates
// it answers UNIMPLEMENTED (see Code), and deletes nothing.
func (c *Client) CheckDelete(ctx context.Context, kind legion.Kind, namespace, name string, expectedVersion *uint64, after []legion.Object) (legion.Object, error) {
	refs := make([]*pb.ObjectRef, len(after))
	for i, o := range after {
		m := o.GetMetadata()
		refs[i] = &pb.ObjectRef{Kind: string(o.GetKind()), Namespace: m.Namespace, Name: m.Name}
	}
	resp, err := c.objects.CheckDelete(ctx, &pb.DeleteRequest{Kind: string(kind), Namespace: namespace, Name: name,
		ExpectedVersion: expectedVersion, After: refs})
	if err != nil {
		return nil, wrap(err)
	}
	return pb.FromProto(resp.Object)
}
