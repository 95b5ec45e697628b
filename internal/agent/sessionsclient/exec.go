package sessionsclient

import (
	"context"
	"errors"
	"io"
	"sync"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// exec runs the offered command in the container, feeding it the relayed
// input and sending its output as it comes, then its exit code.
func (c *Client) exec(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.SessionOffer, eo *legionpb.ExecOffer, inputs <-chan *legionpb.AttachInput) error {
	if c.cfg.Exec == nil {
		return sendError(st, status.Error(codes.Unimplemented, "this agent does not run exec sessions"))
	}
	if !safeName(o.TaskUid) || !safeName(o.Container) {
		return sendError(st, status.Errorf(codes.InvalidArgument, "task uid %q and container %q: expected plain names", o.TaskUid, o.Container))
	}
	if len(eo.Command) == 0 {
		return sendError(st, status.Error(codes.InvalidArgument, "exec: command: missing"))
	}
	// stdout and stderr are copied by different goroutines of the
	// runtime: one sender at a time.
	var mu sync.Mutex
	send := func(m *legionpb.AttachOutput) error {
		mu.Lock()
		defer mu.Unlock()
		return st.Send(m)
	}
	spec := jail.ExecSpec{Command: eo.Command, TTY: eo.Tty,
		Stdout: streamWriter(func(p []byte) error { return send(&legionpb.AttachOutput{Stdout: p}) }),
		Stderr: streamWriter(func(p []byte) error { return send(&legionpb.AttachOutput{Stderr: p}) })}
	if eo.Stdin {
		pr, pw := io.Pipe()
		defer pr.Close()
		spec.Stdin = pr
		go func() {
			for in := range inputs {
				if len(in.Stdin) > 0 {
					if _, err := pw.Write(in.Stdin); err != nil {
						return
					}
				}
				if in.StdinClosed {
					pw.Close()
					return
				}
			}
			pw.CloseWithError(io.ErrUnexpectedEOF) // the manager went away
		}()
	}
	code, err := c.cfg.Exec(ctx, o.TaskUid+"-"+o.Container, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return sendError(st, execStatus(o, err))
	}
	c32 := int32(code)
	return send(&legionpb.AttachOutput{ExitCode: &c32})
}

// execStatus says why a command did not run, with the code the user gets.
func execStatus(o *legionpb.SessionOffer, err error) error {
	switch {
	case errors.Is(err, jail.ErrNotFound):
		return status.Errorf(codes.NotFound, "container %s of task %s/%s is not on its node", o.Container, o.Namespace, o.Task)
	case errors.Is(err, jail.ErrNotRunning):
		return status.Errorf(codes.FailedPrecondition, "container %s of task %s/%s is not running", o.Container, o.Namespace, o.Task)
	case errors.Is(err, jail.ErrPermanent):
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	return status.Errorf(codes.Internal, "%v", err)
}

// streamWriter sends each write as one message (copied: the caller may
// reuse its buffer).
type streamWriter func([]byte) error

func (w streamWriter) Write(p []byte) (int, error) {
	if err := w(append([]byte(nil), p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}
