package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// objectsService is the Objects API over the store.
type objectsService struct {
	pb.UnimplementedObjectsServer
	s *Server
}

// scope checks a request's kind and namespace: a namespaced kind without
// a namespace means the default one (or every one, with all), a
// cluster-scoped kind has none, and the reserved namespace is never shown.
func scope(kind, namespace string, all bool) (legion.Kind, string, error) {
	k := legion.Kind(kind)
	if !k.Known() {
		return "", "", status.Errorf(codes.InvalidArgument, "unknown kind %q", kind)
	}
	if !k.Namespaced() {
		return k, "", nil
	}
	if all {
		return k, "", nil
	}
	if namespace == "" {
		namespace = legion.DefaultNamespace
	}
	if namespace == legion.SystemNamespace {
		return "", "", status.Errorf(codes.PermissionDenied, "namespace %s is reserved", legion.SystemNamespace)
	}
	return k, namespace, nil
}

func visible(o legion.Object, labels map[string]string) bool {
	m := o.GetMetadata()
	if m.Namespace == legion.SystemNamespace {
		return false
	}
	for k, v := range labels {
		if m.Labels[k] != v {
			return false
		}
	}
	return true
}

func (o *objectsService) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	kind, ns, err := scope(req.Kind, req.Namespace, false)
	if err != nil {
		return nil, err
	}
	a, err := o.s.accessOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.checkNamed(rbac.Read, kind, ns, req.Name); err != nil {
		return nil, err
	}
	st, conn, fctx, err := o.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		r, err := pb.NewObjectsClient(conn).Get(fctx, req)
		if readAgain(ctx, err, false) {
			if _, again, actx, lerr := o.s.leader(ctx); lerr == nil && again != nil {
				r, err = pb.NewObjectsClient(again).Get(actx, req)
			}
		}
		return r, err
	}
	if err := st.Barrier(ctx); err != nil {
		return nil, toStatus(err)
	}
	obj, at, err := st.Get(kind, ns, req.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	p, err := pb.ToProto(obj)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.GetResponse{Object: p, Version: at}, nil
}

func (o *objectsService) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	return o.delete(ctx, req, false)
}

// CheckDelete is Delete's dry run: its checks, on the leader, and the
// object as the delete would leave it.
func (o *objectsService) CheckDelete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	return o.delete(ctx, req, true)
}

func (o *objectsService) delete(ctx context.Context, req *pb.DeleteRequest, dryRun bool) (*pb.DeleteResponse, error) {
	kind, ns, err := scope(req.Kind, req.Namespace, false)
	if err != nil {
		return nil, err
	}
	a, err := o.s.accessOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.check(rbac.Write, kind, ns); err != nil {
		return nil, err
	}
	st, conn, fctx, err := o.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil && dryRun {
		return pb.NewObjectsClient(conn).CheckDelete(fctx, req)
	}
	if conn != nil {
		return pb.NewObjectsClient(conn).Delete(fctx, req)
	}
	var pre store.Precondition
	if req.ExpectedVersion != nil {
		pre.Version = *req.ExpectedVersion
	}
	if dryRun {
		return checkDelete(st, kind, ns, req.Name, pre, goneBefore(req.After))
	}
	if kind == legion.KindNode {
		// A manager leaves Raft first; its removal is recorded below.
		if err := o.s.removeManager(st, req.Name, pre); err != nil {
			return nil, err
		}
		if err := o.s.revokeRemovedNode(ctx, st, req.Name, pre); err != nil {
			return nil, toStatus(err)
		}
	}
	if err := refuseInUse(st, kind, ns, req.Name, nil); err != nil {
		return nil, err
	}
	var obj legion.Object
	stopped := false
	if kind == legion.KindTask {
		if obj, stopped, err = stopTask(ctx, st, ns, req.Name, pre); err != nil {
			return nil, toStatus(err)
		}
	}
	if !stopped {
		if obj, err = st.Delete(ctx, kind, ns, req.Name, pre); err != nil {
			return nil, toStatus(err)
		}
	}
	p, err := pb.ToProto(obj)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteResponse{Object: p}, nil
}

// checkDelete makes the checks a delete of kind ns/name at pre makes on
// the leader st, taking the objects gone says as deleted already, and
// answers with the object as the delete would leave it: gone, or, for a
// task placed and not stopped, told to stop.
func checkDelete(st *store.Store, kind legion.Kind, ns, name string, pre store.Precondition, gone func(legion.Kind, string, string) bool) (*pb.DeleteResponse, error) {
	obj, _, err := st.Get(kind, ns, name)
	if err == nil && gone(kind, ns, name) {
		err = &notFound{kind: kind, name: strings.TrimPrefix(ns+"/"+name, "/")}
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if v := obj.GetMetadata().Version; pre.Version != 0 && v != pre.Version {
		return nil, toStatus(fmt.Errorf("%s %s: expected version %d, found %d: %w", kind, strings.TrimPrefix(ns+"/"+name, "/"), pre.Version, v, store.ErrConflict))
	}
	if kind == legion.KindNode {
		if _, _, _, err := managerToRemove(st, name, pre, gone); err != nil {
			return nil, err
		}
	}
	if err := refuseInUse(st, kind, ns, name, gone); err != nil {
		return nil, err
	}
	if t, ok := obj.(*legion.Task); ok && !t.Status.State.Terminal() && t.Spec.Placed != nil && t.Spec.DesiredState != legion.TaskShutdown {
		t.Spec.DesiredState, t.Spec.StopReason = legion.TaskShutdown, taskDeleted // as stopTask would
	}
	p, err := pb.ToProto(obj)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteResponse{Object: p}, nil
}

// goneBefore says whether an object is among refs, the objects a dry
// run's earlier deletes take out (an empty namespace is default for a
// namespaced kind).
func goneBefore(refs []*pb.ObjectRef) func(legion.Kind, string, string) bool {
	set := make(map[string]bool, len(refs))
	for _, r := range refs {
		kind, ns := legion.Kind(r.Kind), r.Namespace
		if ns == "" && kind.Namespaced() {
			ns = legion.DefaultNamespace
		}
		set[legion.Key(kind, ns, r.Name)] = true
	}
	return func(kind legion.Kind, ns, name string) bool { return set[legion.Key(kind, ns, name)] }
}

// notFound is the store's ErrNotFound for an object a dry run took out.
type notFound struct {
	kind legion.Kind
	name string
}

func (e *notFound) Error() string { return fmt.Sprintf("%s %s: %v", e.kind, e.name, store.ErrNotFound) }
func (e *notFound) Unwrap() error { return store.ErrNotFound }

// Watch follows the local replica: it never forwards, and ends with
// UNAVAILABLE at shutdown.
func (o *objectsService) Watch(req *pb.WatchRequest, stream grpc.ServerStreamingServer[pb.WatchEvent]) error {
	kind, ns, err := scope(req.Kind, req.Namespace, req.AllNamespaces)
	if err != nil {
		return err
	}
	a, err := o.s.accessOf(stream.Context())
	if err != nil {
		return err
	}
	if !filtersList(kind, ns) {
		if err := a.check(rbac.Read, kind, ns); err != nil {
			return err
		}
	}
	st := o.s.store()
	if st == nil {
		return o.s.notServing(o.s.role())
	}
	w, err := st.Watch(req.FromVersion, kind) // events of this kind only
	if err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	stop := context.AfterFunc(o.s.watchCtx, func() { cancel(nil) })
	defer stop()
	go o.s.endWhenLowered(ctx, a, cancel, "watch")
	for {
		e, err := w.Next(ctx)
		if err != nil {
			if o.s.watchCtx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return status.Error(codes.Unavailable, "the manager is shutting down")
			}
			if cause := context.Cause(ctx); status.Code(cause) == codes.PermissionDenied {
				return cause
			}
			return toStatus(err)
		}
		m := e.Object.GetMetadata()
		if (ns != "" && m.Namespace != ns) || !visible(e.Object, req.Labels) {
			continue
		}
		if !a.readable(e.Object) {
			continue
		}
		p, err := e.Encoded(func(o legion.Object) (any, error) { return pb.ToProto(o) })
		if err != nil {
			return toStatus(err)
		}
		if err := stream.Send(&pb.WatchEvent{Type: string(e.Type), Version: e.Version, Object: p.(*pb.Object)}); err != nil {
			return err
		}
	}
}

func (o *objectsService) Apply(ctx context.Context, req *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	items, err := decodeApply(req)
	if err != nil {
		return nil, err
	}
	a, err := o.s.accessOf(ctx)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if err := a.check(rbac.Write, it.obj.GetKind(), it.obj.GetMetadata().Namespace); err != nil {
			return nil, status.Errorf(codes.PermissionDenied, "%s %s: %s (nothing applied)", it.obj.GetKind(), legion.DisplayName(it.obj), status.Convert(err).Message())
		}
	}
	st, conn, fctx, err := o.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewObjectsClient(conn).Apply(fctx, req)
	}
	return applyItems(ctx, st, items, applyMode{dryRun: req.DryRun, brief: req.Brief, user: a != nil}, &o.s.admit)
}
