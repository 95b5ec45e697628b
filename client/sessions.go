package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
)

// Target is what a session (logs, exec, port-forward) reaches: a task, or
// one of a service's or job's running tasks (else, for logs, the one that
// last ended).
type Target struct {
	Namespace string      // empty: legion.DefaultNamespace
	Kind      legion.Kind // KindTask, KindService or KindJob; empty: whichever has the name
	Name      string
	Container string // needed when the pod has several; not used by port-forward
}

func (t Target) proto() (*pb.Target, error) {
	switch t.Kind {
	case "", legion.KindTask, legion.KindService, legion.KindJob:
	default:
		return nil, fmt.Errorf("target %s/%s: a session reaches a task, a service or a job, not a %s", t.Kind, t.Name, t.Kind)
	}
	if t.Name == "" {
		return nil, errors.New("target: a name is required")
	}
	return &pb.Target{Namespace: t.Namespace, Kind: string(t.Kind), Name: t.Name, Container: t.Container}, nil
}

// LogsOptions narrow what Logs reads.
type LogsOptions struct {
	Follow bool      // go on with new output until ctx ends
	Since  time.Time // only records at or after it; zero for all
}

// LogRecord is one line of a container's output, or part of one.
type LogRecord struct {
	Time    time.Time
	Stream  string // stdout or stderr
	Partial bool   // the line goes on in the next record of its stream
	Text    string
}

// LogFrame is a batch of records of one task's container.
type LogFrame struct {
	Task, Container, Node string
	Records               []LogRecord
}

// Logs reads a task's output, calling fn with each batch until the
// output ends (or, following, until ctx ends, which returns nil). An
// error from fn ends the reading and is returned.
func (c *Client) Logs(ctx context.Context, t Target, o LogsOptions, fn func(LogFrame) error) error {
	target, err := t.proto()
	if err != nil {
		return err
	}
	req := &pb.LogsRequest{Target: target, Follow: o.Follow}
	if !o.Since.IsZero() {
		req.SinceUnixNano = o.Since.UnixNano()
	}
	stream, err := pb.NewPodsClient(c.conn).Logs(ctx, req)
	for err == nil {
		var f *pb.LogFrame
		if f, err = stream.Recv(); err != nil {
			break
		}
		frame := LogFrame{Task: f.Task, Container: f.Container, Node: f.Node, Records: make([]LogRecord, 0, len(f.Records))}
		for _, r := range f.Records {
			rec := LogRecord{Stream: r.Stream, Partial: r.Partial, Text: r.Text}
			if r.TimeUnixNano != 0 {
				rec.Time = time.Unix(0, r.TimeUnixNano).UTC()
			}
			frame.Records = append(frame.Records, rec)
		}
		if ferr := fn(frame); ferr != nil {
			return ferr
		}
	}
	if errors.Is(err, io.EOF) || (ctx.Err() != nil && o.Follow) {
		return nil
	}
	return wrap(err)
}

// ExecOptions say what to run and where its streams go.
type ExecOptions struct {
	Command []string
	// Stdin, when set, is sent to the command, and its end closes the
	// command's input; without it the command reads nothing.
	Stdin  io.Reader
	Stdout io.Writer // nil discards
	Stderr io.Writer // nil discards; on a terminal everything comes on Stdout
	// TTY runs the command on a terminal, where the node's runtime offers
	// one (jails); elsewhere the call is refused.
	TTY bool
	// Size is the terminal's size at the start (nil: the node's default);
	// Resize brings its later sizes, until it is closed or the command
	// ends. Both need TTY.
	Size   *TermSize
	Resize <-chan TermSize
}

// TermSize is a terminal's size in characters; neither may be 0.
type TermSize struct {
	Rows, Cols uint16
}

func (s TermSize) proto() *pb.TermSize {
	return &pb.TermSize{Rows: uint32(s.Rows), Cols: uint32(s.Cols)}
}

// check refuses settings of the terminal that the session could not
// apply, naming the field.
func (o ExecOptions) check() error {
	switch {
	case o.Size != nil && !o.TTY:
		return errors.New("exec: Size: a terminal size needs TTY")
	case o.Resize != nil && !o.TTY:
		return errors.New("exec: Resize: terminal resizes need TTY")
	case o.Size != nil && (o.Size.Rows == 0 || o.Size.Cols == 0):
		return fmt.Errorf("exec: Size: %dx%d: rows and cols must each be at least 1", o.Size.Rows, o.Size.Cols)
	}
	return nil
}

// Exec runs a command in a task's running container and returns its
// exit code once it ends. An error means the command's outcome is not
// known (refused, or the session broke).
func (c *Client) Exec(ctx context.Context, t Target, o ExecOptions) (int, error) {
	target, err := t.proto()
	if err != nil {
		return 0, err
	}
	if len(o.Command) == 0 {
		return 0, errors.New("exec: a command is required")
	}
	if err := o.check(); err != nil {
		return 0, err
	}
	start := &pb.ExecStart{Target: target, Command: o.Command, Stdin: o.Stdin != nil, Tty: o.TTY}
	if o.Size != nil {
		start.Size = o.Size.proto()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewPodsClient(c.conn).Exec(ctx)
	if err != nil {
		return 0, wrap(err)
	}
	code, err := runExec(stream, start, o.Stdin, o.Resize, orDiscard(o.Stdout), orDiscard(o.Stderr))
	return code, wrap(err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// execStream is what runExec drives: a Pods.Exec stream.
type execStream interface {
	Send(*pb.ExecInput) error
	CloseSend() error
	Recv() (*pb.ExecOutput, error)
}

// runExec starts the session, sends stdin (then its end) as it is read
// and the terminal's sizes as they come, and writes the output until the
// exit code arrives.
func runExec(stream execStream, start *pb.ExecStart, stdin io.Reader, resize <-chan TermSize, stdout, stderr io.Writer) (int, error) {
	if err := stream.Send(&pb.ExecInput{Start: start}); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	} // io.EOF: the manager ended the stream already (a refusal); Recv says why
	// Sending (the input) and closing (once the command ended) may not
	// overlap on a stream.
	var mu sync.Mutex
	closed := false
	send := func(in *pb.ExecInput) error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return io.EOF
		}
		return stream.Send(in)
	}
	ended := make(chan struct{})
	defer func() {
		close(ended)
		mu.Lock()
		closed = true
		stream.CloseSend()
		mu.Unlock()
	}()
	if resize != nil {
		go func() {
			for {
				select {
				case s, ok := <-resize:
					if !ok || send(&pb.ExecInput{Resize: s.proto()}) != nil {
						return
					}
				case <-ended:
					return
				}
			}
		}()
	}
	if stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					if send(&pb.ExecInput{Stdin: append([]byte(nil), buf[:n]...)}) != nil {
						return
					}
				}
				if err != nil {
					send(&pb.ExecInput{StdinClosed: true})
					return
				}
			}
		}()
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, errors.New("the session ended without the command's exit code")
		}
		if err != nil {
			return 0, err
		}
		if len(m.Stdout) > 0 {
			if _, err := stdout.Write(m.Stdout); err != nil {
				return 0, err
			}
		}
		if len(m.Stderr) > 0 {
			if _, err := stderr.Write(m.Stderr); err != nil {
				return 0, err
			}
		}
		if m.ExitCode != nil {
			return int(*m.ExitCode), nil
		}
	}
}

// CheckPortForward says whether PortForward to port of the task t names
// would be carried now (the caller's rights, a task running with an
// address), connecting nothing to the pod: a caller that listens for
// connections learns before it says it forwards. It returns the task
// reached. A manager that predates the check connects to the pod and is
// left at once.
func (c *Client) CheckPortForward(ctx context.Context, t Target, port int) (string, error) {
	target, err := t.proto()
	if err != nil {
		return "", err
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("port-forward: port %d: expected 1 to 65535", port)
	}
	target.Container = ""
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewPodsClient(c.conn).PortForward(sctx)
	if err != nil {
		return "", wrap(err)
	}
	if err := stream.Send(&pb.PortForwardInput{Target: target, Port: int32(port), Check: true}); err != nil && !errors.Is(err, io.EOF) {
		return "", wrap(err)
	} // io.EOF: the manager ended the stream already (a refusal); Recv says why
	m, err := stream.Recv()
	if err != nil {
		return "", wrap(err)
	}
	return m.Task, nil
}

// PortForward carries one connection to port of a task's pod, until
// either side closes it or ctx ends. It closes conn.
func (c *Client) PortForward(ctx context.Context, t Target, port int, conn io.ReadWriteCloser) error {
	defer conn.Close()
	target, err := t.proto()
	if err != nil {
		return err
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("port-forward: port %d: expected 1 to 65535", port)
	}
	target.Container = ""
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewPodsClient(c.conn).PortForward(sctx)
	if err != nil {
		return wrap(err)
	}
	if err := stream.Send(&pb.PortForwardInput{Target: target, Port: int32(port)}); err != nil && !errors.Is(err, io.EOF) {
		return wrap(err)
	} // io.EOF: the manager ended the stream already (a refusal); Recv says why
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if stream.Send(&pb.PortForwardInput{Data: append([]byte(nil), buf[:n]...)}) != nil {
					return
				}
			}
			if err != nil {
				stream.Send(&pb.PortForwardInput{Closed: true})
				stream.CloseSend()
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return wrap(err)
		}
		if len(m.Data) > 0 {
			if _, err := conn.Write(m.Data); err != nil {
				return err
			}
		}
	}
}

// ServePortForward accepts connections on l until ctx ends (then it
// closes l and returns nil), carrying each to port of the task's pod.
// A connection that fails is reported to onErr, which may be nil.
func (c *Client) ServePortForward(ctx context.Context, l net.Listener, t Target, port int, onErr func(error)) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.PortForward(ctx, t, port, conn); err != nil && ctx.Err() == nil && onErr != nil {
				onErr(err)
			}
		}()
	}
}
