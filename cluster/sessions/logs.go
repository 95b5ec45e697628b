package sessions

import (
	"context"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type podsServer struct {
	legionpb.UnimplementedPodsServer
	s *Service
}

// Logs resolves the target, offers the session to its node's agent and
// relays the records the agent sends until it ends them or the caller
// goes away.
func (h podsServer) Logs(req *legionpb.LogsRequest, out legionpb.Pods_LogsServer) error {
	s := h.s
	// A user losing the right to read ends the session with the reason.
	ctx, end := context.WithCancelCause(out.Context())
	defer end(nil)
	id, err := user(ctx, "logs")
	if err != nil {
		return err
	}
	objs, err := s.objects()
	if err != nil {
		return err
	}
	if err := allowed(objs, id, rbac.Read, "logs", targetNamespace(req.Target)); err != nil {
		return err
	}
	r, err := resolve(objs, req.Target)
	if err != nil {
		return err
	}
	t := r.task
	go s.endWhenDenied(ctx, id, rbac.Read, "logs", t.Metadata.Namespace, end)
	a, err := s.attach(ctx, t.Spec.Node, &legionpb.SessionOffer{
		Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, TaskUid: t.Metadata.UID, Container: r.container,
		Kind: &legionpb.SessionOffer_Logs{Logs: &legionpb.LogsOffer{Follow: req.Follow, SinceUnixNano: req.SinceUnixNano}},
	})
	if err != nil {
		return err
	}
	defer a.close()
	if err := out.Send(&legionpb.LogFrame{Task: t.Metadata.Name, Container: r.container, Node: t.Spec.Node}); err != nil {
		return err
	}
	err = a.relay(ctx, func(m *legionpb.AttachOutput) error {
		if len(m.Records) == 0 {
			return nil
		}
		return out.Send(&legionpb.LogFrame{Records: m.Records})
	})
	if ctx.Err() != nil && out.Context().Err() == nil {
		return context.Cause(ctx) // the refusal that ended it
	}
	return neverStarted(t, r.container, err)
}

// neverStarted says, in place of the agent's "no output" for a task that
// has not run, why there is nothing to read: what ended a task before it
// ran (a command not found, an image not pulled), or that it has not
// started yet (its state, and what it waits for), as kubectl says of a
// container waiting to start.
func neverStarted(t *legion.Task, container string, err error) error {
	if status.Code(err) != codes.NotFound || t.Status.Started != nil {
		return err
	}
	name := t.Metadata.Namespace + "/" + t.Metadata.Name
	switch {
	case t.Status.State.Terminal() && t.Status.Message != "":
		return status.Errorf(codes.NotFound, "container %s of task %s has no output: the task ended before it ran: %s",
			container, name, t.Status.Message)
	case !t.Status.State.Terminal() && t.Status.State != legion.TaskRunning:
		why := ""
		if t.Status.Message != "" {
			why = ": " + t.Status.Message
		}
		return status.Errorf(codes.NotFound, "container %s of task %s has no output yet: the task has not started (%s%s)",
			container, name, t.Status.State, why)
	}
	return err
}

// waitAttach waits for the agent's Attach to the offered session.
func (s *Service) waitAttach(ctx context.Context, ss *session) (legionpb.Sessions_AttachServer, error) {
	timer := time.NewTimer(s.attachIn)
	defer timer.Stop()
	select {
	case a := <-ss.attached:
		// Shutdown ends the session like the caller leaving does.
		go func() {
			select {
			case <-s.stopped():
				ss.finish()
			case <-ss.done:
			}
		}()
		return a, nil
	case <-timer.C:
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s did not answer the session within %s", ss.node, s.attachIn)
	case <-ss.gone:
		// Not the wait for an answer that cannot come: its stream ended
		// after the offer went out (the agent stopped, or its connection
		// broke).
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s dropped the session before it attached", ss.node)
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-s.stopped():
		return nil, errStopping
	}
}
