package sessions

import (
	"context"

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
	// Input the session cannot take ends it with the reason (the cause).
	ctx, fail := context.WithCancelCause(stream.Context())
	defer fail(nil)
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
	if err := checkSize("size", start.Size, start.Tty); err != nil {
		return err
	}
	objs, err := s.objects()
	if err != nil {
		return err
	}
	if err := allowed(objs, id, rbac.Write, "exec", targetNamespace(start.Target)); err != nil {
		return err
	}
	r, err := resolve(objs, start.Target)
	if err != nil {
		return err
	}
	t := r.task
	go s.endWhenDenied(ctx, id, rbac.Write, "exec", t.Metadata.Namespace, fail)
	if t.Status.State != legion.TaskRunning {
		return status.Errorf(codes.FailedPrecondition, "exec: task %s/%s is %s, not running", t.Metadata.Namespace, t.Metadata.Name, t.Status.State)
	}
	a, err := s.attach(ctx, t.Spec.Node, &legionpb.SessionOffer{
		Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, TaskUid: t.Metadata.UID, Container: r.container,
		Kind: &legionpb.SessionOffer_Exec{Exec: &legionpb.ExecOffer{Command: start.Command, Stdin: start.Stdin, Tty: start.Tty, Size: start.Size}},
	})
	if err != nil {
		return err
	}
	defer a.close()
	if err := stream.Send(&legionpb.ExecOutput{Task: t.Metadata.Name, Container: r.container, Node: t.Spec.Node}); err != nil {
		return err
	}
	// The caller's input and terminal sizes go on to the agent; the
	// caller closing its side is the input's end.
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
			if in.Resize != nil {
				if err := checkSize("resize", in.Resize, start.Tty); err != nil {
					fail(err)
					return
				}
				if a.send(&legionpb.AttachInput{Resize: in.Resize}) != nil {
					return
				}
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
	err = a.relay(ctx, func(m *legionpb.AttachOutput) error {
		if len(m.Stdout) == 0 && len(m.Stderr) == 0 && m.ExitCode == nil {
			return nil
		}
		return stream.Send(&legionpb.ExecOutput{Stdout: m.Stdout, Stderr: m.Stderr, ExitCode: m.ExitCode})
	})
	if ctx.Err() != nil && stream.Context().Err() == nil {
		return context.Cause(ctx) // fail's reason
	}
	return err
}

// checkSize refuses a terminal size out of range, or given for a command
// not run on a terminal.
func checkSize(field string, s *legionpb.TermSize, tty bool) error {
	switch {
	case s == nil:
		return nil
	case !tty:
		return status.Errorf(codes.InvalidArgument, "exec: %s: a terminal size needs tty", field)
	case s.Rows < 1 || s.Rows > maxTermSide || s.Cols < 1 || s.Cols > maxTermSide:
		return status.Errorf(codes.InvalidArgument, "exec: %s: %dx%d: rows and cols are each 1 to %d", field, s.Rows, s.Cols, maxTermSide)
	}
	return nil
}

// maxTermSide is the most rows or columns a terminal has (the kernel's
// window size holds each in 16 bits).
const maxTermSide = 65535
