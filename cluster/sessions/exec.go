package sessions

import (
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exec runs a command in a task's running container: the caller's first
// message says what and where, the session is offered to the node's agent
// like a logs session, and the manager relays input to the agent and
// output, then the exit code, back.
func (h podsServer) Exec(stream legionpb.Pods_ExecServer) error {
	s := h.s
	ctx := stream.Context()
	id, err := user(ctx, "exec")
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "exec: the first message must say what to run (start)")
	}
	if len(start.Command) == 0 || start.Command[0] == "" {
		return status.Error(codes.InvalidArgument, "exec: command: missing")
	}
	objs, err := s.objects()
	if err != nil {
		return err
	}
	r, err := resolve(objs, start.Target)
	if err != nil {
		return err
	}
	t := r.task
	if err := allowed(objs, id, rbac.Write, "exec", t.Metadata.Namespace); err != nil {
		return err
	}
	if t.Status.State != legion.TaskRunning {
		return status.Errorf(codes.FailedPrecondition, "exec: task %s/%s is %s, not running", t.Metadata.Namespace, t.Metadata.Name, t.Status.State)
	}
	a, err := s.attach(ctx, t.Spec.Node, &legionpb.SessionOffer{
		Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, TaskUid: t.Metadata.UID, Container: r.container,
		Kind: &legionpb.SessionOffer_Exec{Exec: &legionpb.ExecOffer{Command: start.Command, Stdin: start.Stdin, Tty: start.Tty}},
	})
	if err != nil {
		return err
	}
	defer a.close()
	if err := stream.Send(&legionpb.ExecOutput{Task: t.Metadata.Name, Container: r.container, Node: t.Spec.Node}); err != nil {
		return err
	}
	// The caller's input goes on to the agent; the caller closing its
	// side is the input's end.
	go func() {
		closed := !start.Stdin
		for {
			in, err := stream.Recv()
			if err != nil {
				if !closed {
					a.send(&legionpb.AttachInput{StdinClosed: true})
				}
				return
			}
			if closed {
				continue
			}
			closed = in.StdinClosed
			if len(in.Stdin) > 0 || in.StdinClosed {
				if a.send(&legionpb.AttachInput{Stdin: in.Stdin, StdinClosed: in.StdinClosed}) != nil {
					return
				}
			}
		}
	}()
	return a.relay(ctx, func(m *legionpb.AttachOutput) error {
		if len(m.Stdout) == 0 && len(m.Stderr) == 0 && m.ExitCode == nil {
			return nil
		}
		return stream.Send(&legionpb.ExecOutput{Stdout: m.Stdout, Stderr: m.Stderr, ExitCode: m.ExitCode})
	})
}
