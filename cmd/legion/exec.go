package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
	"golang.org/x/term"
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
name picks one of its running tasks, a stateful service's ordinal name,
db-0, the ordinal's), as the container's user, in its
environment. Its output comes back on standard output and standard error,
and legion exits with its exit code. With -i standard input is sent to it.
A pod with several containers needs -c. With -t the command runs on a
terminal (jails nodes; its output then comes on standard output alone)
as large as the terminal on standard input, and resized with it; with
-i as well that terminal is put in raw mode meanwhile.`,
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
			var size *client.TermSize
			var resizes <-chan client.TermSize
			if f, ok := cmd.InOrStdin().(*os.File); ok && o.tty {
				var stop func()
				size, resizes, stop = followTerminal(f)
				defer stop()
			}
			code, err := cli.exec(cmd, args[0], args[1:], o, in, size, resizes)
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
func (c *clusterCLI) exec(cmd *cobra.Command, arg string, command []string, o execOptions, stdin io.Reader, size *client.TermSize, resizes <-chan client.TermSize) (int, error) {
	target, err := logsTarget(arg, o.namespace, o.container)
	if err != nil {
		return 0, err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	code, err := cl.Exec(ctxOf(cmd), target, client.ExecOptions{Command: command, Stdin: stdin, TTY: o.tty,
		Size: size, Resize: resizes, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
	if err != nil {
		return 0, fmt.Errorf("exec %s: %w", arg, err)
	}
	return code, nil
}

// followTerminal reads the size of the terminal on f and, until stop, its
// new sizes as SIGWINCH announces them. Off a terminal there is neither:
// nil, nil.
func followTerminal(f *os.File) (size *client.TermSize, resizes <-chan client.TermSize, stop func()) {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return nil, nil, func() {}
	}
	get := func() (client.TermSize, bool) {
		w, h, err := term.GetSize(fd)
		if err != nil || w < 1 || h < 1 || w > math.MaxUint16 || h > math.MaxUint16 {
			return client.TermSize{}, false
		}
		return client.TermSize{Rows: uint16(h), Cols: uint16(w)}, true
	}
	if s, ok := get(); ok {
		size = &s
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	out := make(chan client.TermSize)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-winch:
				s, ok := get()
				if !ok {
					continue
				}
				select {
				case out <- s:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return size, out, func() {
		once.Do(func() {
			signal.Stop(winch)
			close(done)
		})
	}
}
