package sessions

import (
	"context"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PortForward is one TCP connection to a port of a task's pod: the agent
// of the pod's node connects, and the manager relays the bytes both ways
// until either side ends.
func (h podsServer) PortForward(stream legionpb.Pods_PortForwardServer) error {
	s := h.s
	// A user losing the right ends the connection with the reason.
	ctx, end := context.WithCancelCause(stream.Context())
	defer end(nil)
	id, err := user(ctx, "port-forward")
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.Port < 1 || first.Port > 65535 {
		return status.Errorf(codes.InvalidArgument, "port-forward: port %d: expected 1 to 65535", first.Port)
	}
	objs, err := s.objects()
	if err != nil {
		return err
	}
	if err := allowed(objs, id, rbac.Write, "port-forward", targetNamespace(first.Target)); err != nil {
		return err
	}
	t, err := resolveTask(objs, first.Target)
	if err != nil {
		return err
	}
	if t.Status.State != legion.TaskRunning || t.Status.IP == "" {
		return status.Errorf(codes.FailedPrecondition, "port-forward: task %s/%s is %s, not running with an address", t.Metadata.Namespace, t.Metadata.Name, t.Status.State)
	}
	if first.Check {
		return stream.Send(&legionpb.PortForwardOutput{Task: t.Metadata.Name, Node: t.Spec.Node})
	}
	go s.endWhenDenied(ctx, id, rbac.Write, "port-forward", t.Metadata.Namespace, end)
	a, err := s.attach(ctx, t.Spec.Node, &legionpb.SessionOffer{
		Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, TaskUid: t.Metadata.UID,
		Kind: &legionpb.SessionOffer_PortForward{PortForward: &legionpb.PortForwardOffer{PodIp: t.Status.IP, Port: first.Port}},
	})
	if err != nil {
		return err
	}
	defer a.close()
	if err := stream.Send(&legionpb.PortForwardOutput{Task: t.Metadata.Name, Node: t.Spec.Node}); err != nil {
		return err
	}
	go func() {
		for {
			in, err := stream.Recv()
			if err != nil {
				a.send(&legionpb.AttachInput{Closed: true})
				return
			}
			if len(in.Data) > 0 || in.Closed {
				if a.send(&legionpb.AttachInput{Data: in.Data, Closed: in.Closed}) != nil || in.Closed {
					return
				}
			}
		}
	}()
	err = a.relay(ctx, func(m *legionpb.AttachOutput) error {
		if len(m.Data) == 0 {
			return nil
		}
		return stream.Send(&legionpb.PortForwardOutput{Data: m.Data})
	})
	if ctx.Err() != nil && stream.Context().Err() == nil {
		return context.Cause(ctx) // the refusal that ended it
	}
	return err
}
