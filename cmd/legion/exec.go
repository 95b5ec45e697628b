package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/legionbsd/legion"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/status"
)

type execOptions struct {
	namespace, container string
	stdin, tty           bool
}

// newExecCommand is `legion exec`: a command run in a task's running
// container, through any manager and the agent of the task's node.
func newExecCommand() *cobra.Command {
	cli := newClusterCLI()
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [-i] TASK|SERVICE|JOB [-c CONTAINER] -- COMMAND [ARG...]",
		Short: "Run a command in a task's running container",
		Long: `Exec runs a command in a running container of a task (a service or job
name picks one of its running tasks), as the container's user, in its
environment. Its output comes back on standard output and standard error,
and legion exits with its exit code. With -i standard input is sent to it.
A pod with several containers needs -c. With -t the command runs on a
terminal (jails nodes; its output then comes on standard output alone),
and a terminal on standard input is put in raw mode meanwhile; its size
is not passed on yet.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("expected TASK -- COMMAND: put -- between the task and the command")
			}
			var in io.Reader
			if o.stdin {
				in = cmd.InOrStdin()
				if f, ok := in.(*os.File); ok && o.tty && term.IsTerminal(int(f.Fd())) {
					old, err := term.MakeRaw(int(f.Fd()))
					if err != nil {
						return fmt.Errorf("exec: terminal: %w", err)
					}
					defer term.Restore(int(f.Fd()), old)
				}
			}
			code, err := cli.exec(cmd, args[0], args[1:], o, in)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the task, service or job")
	f.StringVarP(&o.container, "container", "c", "", "container to run in, when the pod has several")
	f.BoolVarP(&o.stdin, "stdin", "i", false, "send standard input to the command")
	f.BoolVarP(&o.tty, "tty", "t", false, "run the command on a terminal")
	return cmd
}

// exec runs the session and returns the command's exit code.
func (c *clusterCLI) exec(cmd *cobra.Command, arg string, command []string, o execOptions, stdin io.Reader) (int, error) {
	target, err := logsTarget(arg, o.namespace, o.container)
	if err != nil {
		return 0, err
	}
	conn, err := c.podsConn(cmd)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctxOf(cmd))
	defer cancel()
	stream, err := legionpb.NewPodsClient(conn).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec %s: %w", arg, err)
	}
	code, err := runExec(stream, &legionpb.ExecStart{Target: target, Command: command, Stdin: stdin != nil, Tty: o.tty}, stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if err != nil {
		if s, ok := status.FromError(err); ok {
			return 0, fmt.Errorf("exec %s: %s", arg, s.Message())
		}
		return 0, fmt.Errorf("exec %s: %w", arg, err)
	}
	return code, nil
}

// execStream is what runExec drives: a Pods.Exec stream.
type execStream interface {
	Send(*legionpb.ExecInput) error
	CloseSend() error
	Recv() (*legionpb.ExecOutput, error)
}

// runExec starts the session, sends stdin (then its end) as it is read,
// and writes the output until the exit code arrives.
func runExec(stream execStream, start *legionpb.ExecStart, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if err := stream.Send(&legionpb.ExecInput{Start: start}); err != nil {
		return 0, err
	}
	// Sending (the input) and closing (once the command ended) may not
	// overlap on a stream.
	var mu sync.Mutex
	closed := false
	send := func(in *legionpb.ExecInput) error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return io.EOF
		}
		return stream.Send(in)
	}
	defer func() {
		mu.Lock()
		closed = true
		stream.CloseSend()
		mu.Unlock()
	}()
	if stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					if send(&legionpb.ExecInput{Stdin: append([]byte(nil), buf[:n]...)}) != nil {
						return
					}
				}
				if err != nil {
					send(&legionpb.ExecInput{StdinClosed: true})
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
