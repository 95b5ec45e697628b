package pods

import (
	"context"
	"errors"
	"io"
	"sync"

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
	ctx := stream.Context()
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
	t, err := resolveTask(objs, first.Target)
	if err != nil {
		return err
	}
	if err := allowed(objs, id, rbac.Write, "port-forward", t.Metadata.Namespace); err != nil {
		return err
	}
	if t.Status.State != legion.TaskRunning || t.Status.IP == "" {
		return status.Errorf(codes.FailedPrecondition, "port-forward: task %s/%s is %s, not running with an address", t.Metadata.Namespace, t.Metadata.Name, t.Status.State)
	}
	ss, err := s.offer(ctx, t.Spec.Node, &legionpb.SessionOffer{
		Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, TaskUid: t.Metadata.UID,
		Kind: &legionpb.SessionOffer_PortForward{PortForward: &legionpb.PortForwardOffer{PodIp: t.Status.IP, Port: first.Port}},
	})
	if err != nil {
		return err
	}
	defer s.forget(ss)
	agent, err := s.waitAttach(ctx, ss)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, ss.finish)
	defer stop()
	if err := stream.Send(&legionpb.PortForwardOutput{Task: t.Metadata.Name, Node: t.Spec.Node}); err != nil {
		return err
	}
	// As for exec: the relay stops sending once the session is over.
	var mu sync.Mutex
	over := false
	send := func(in *legionpb.AttachInput) error {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return io.EOF
		}
		return agent.Send(in)
	}
	defer func() { mu.Lock(); over = true; mu.Unlock() }()
	go func() {
		for {
			in, err := stream.Recv()
			if err != nil {
				send(&legionpb.AttachInput{Closed: true})
				return
			}
			if len(in.Data) > 0 || in.Closed {
				if send(&legionpb.AttachInput{Data: in.Data, Closed: in.Closed}) != nil || in.Closed {
					return
				}
			}
		}
	}()
	for {
		m, err := agent.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			select {
			case <-s.stopped():
				return errStopping
			default:
			}
			return status.Errorf(codes.Unavailable, "the agent of node %s dropped the connection: %v", t.Spec.Node, err)
		}
		if m.Error != nil {
			return status.Error(codes.Code(m.Error.Code), m.Error.Message)
		}
		if len(m.Data) == 0 {
			continue
		}
		if err := stream.Send(&legionpb.PortForwardOutput{Data: m.Data}); err != nil {
			return err
		}
	}
}
