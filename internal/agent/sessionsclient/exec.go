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
	if eo.Size != nil {
		if !eo.Tty {
			return sendError(st, status.Error(codes.InvalidArgument, "exec: size: a terminal size needs tty"))
		}
		size, err := termSize("size", eo.Size)
		if err != nil {
			return sendError(st, err)
		}
		spec.Size = &size
	}
	// A resize that cannot apply ends the session with its reason (the
	// cause), rather than leaving the terminal at a size the user did
	// not ask for.
	ectx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var pw *io.PipeWriter
	if eo.Stdin {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		defer pr.Close()
		spec.Stdin = pr
	}
	var resizes chan jail.TermSize
	if eo.Tty {
		resizes = make(chan jail.TermSize)
		spec.Resize = resizes
	}
	if eo.Stdin || eo.Tty {
		go relayInput(ectx, cancel, inputs, pw, resizes)
	}
	code, err := c.cfg.Exec(ectx, o.TaskUid+"-"+o.Container, spec)
	if cause := context.Cause(ectx); ectx.Err() != nil && ctx.Err() == nil && cause != nil {
		return sendError(st, cause)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return sendError(st, execStatus(o, err))
	}
	c32 := int32(code)
	return send(&legionpb.AttachOutput{ExitCode: &c32})
}

// relayInput hands the user's input to the command (stdin, nil when it
// reads none) and the terminal's new sizes to the runtime (resizes, nil
// without a terminal, closed once no more can come) until the manager
// stops relaying or the exec ends.
func relayInput(ctx context.Context, fail context.CancelCauseFunc, inputs <-chan *legionpb.AttachInput, stdin *io.PipeWriter, resizes chan<- jail.TermSize) {
	if resizes != nil {
		defer close(resizes)
	}
	for in := range inputs {
		if stdin != nil && len(in.Stdin) > 0 {
			if _, err := stdin.Write(in.Stdin); err != nil {
				return
			}
		}
		if stdin != nil && in.StdinClosed {
			stdin.Close()
			stdin = nil
		}
		if in.Resize != nil {
			if resizes == nil {
				fail(status.Error(codes.InvalidArgument, "exec: resize: terminal resizes need tty"))
				return
			}
			size, err := termSize("resize", in.Resize)
			if err != nil {
				fail(err)
				return
			}
			select {
			case resizes <- size:
			case <-ctx.Done():
				return
			}
		}
	}
	if stdin != nil {
		stdin.CloseWithError(io.ErrUnexpectedEOF) // the manager went away
	}
}

// termSize is a size from the wire as the runtime takes it.
func termSize(field string, s *legionpb.TermSize) (jail.TermSize, error) {
	if s.Rows < 1 || s.Rows > maxTermSide || s.Cols < 1 || s.Cols > maxTermSide {
		return jail.TermSize{}, status.Errorf(codes.InvalidArgument, "exec: %s: %dx%d: rows and cols are each 1 to %d", field, s.Rows, s.Cols, maxTermSide)
	}
	return jail.TermSize{Rows: uint16(s.Rows), Cols: uint16(s.Cols)}, nil
}

// maxTermSide is the most rows or columns a terminal has (a 16-bit field
// of the kernel's window size).
const maxTermSide = 65535

// execStatus says why a command did not run, with the code the user gets.
func execStatus(o *legionpb.SessionOffer, err error) error {
	switch {
	case errors.Is(err, jail.ErrNotFound):
		return status.Errorf(codes.NotFound, "container %s of task %s/%s is not on its node", o.Container, o.Namespace, o.Task)
	case errors.Is(err, jail.ErrNotRunning):
		return status.Errorf(codes.FailedPrecondition, "container %s of task %s/%s is not running", o.Container, o.Namespace, o.Task)
	case errors.Is(err, jail.ErrPermanent):
		return status.Errorf(codes.InvalidArgument, "container %s of task %s/%s: %s", o.Container, o.Namespace, o.Task, jail.PermanentReason(err))
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
