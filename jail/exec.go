package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// Exec implements Runtime: the supervisor's exec mode enters the jail as
// the container's process does. Output is collected, then written.
func (j *Jails) Exec(ctx context.Context, id string, spec ExecSpec) (int, error) {
	if err := spec.CheckTerminal(); err != nil {
		return -1, fmt.Errorf("exec in %s: %w: %w", id, ErrPermanent, err)
	}
	if _, err := j.ExecTarget(ctx, id); err != nil {
		return -1, err
	}
	if spec.TTY && j.cfg.Spawner == nil {
		return -1, fmt.Errorf("exec in %s: a terminal needs a Spawner (the runner cannot stream)", id)
	}
	args := []string{ShimCommand, "exec", j.records.Path(id)}
	var extra []*os.File
	if spec.TTY {
		args = append(args, "-tty")
		if spec.Size != nil {
			args = append(args, "-size", spec.Size.String())
		}
	}
	if spec.Resize != nil {
		// The shim reads the new sizes from a pipe of its own: its
		// standard input is the terminal's input.
		r, w, err := os.Pipe()
		if err != nil {
			return -1, fmt.Errorf("exec in %s: resize pipe: %w", id, err)
		}
		defer r.Close()
		done := make(chan struct{})
		defer close(done)
		go forwardResizes(w, spec.Resize, done)
		extra = append(extra, r)
		args = append(args, "-resize-fd", strconv.Itoa(firstExtraFD))
	}
	if spec.User != "" {
		args = append(args, "-user", spec.User)
	}
	if spec.WorkDir != "" {
		args = append(args, "-workdir", spec.WorkDir)
	}
	for _, e := range spec.Env {
		args = append(args, "-env", e)
	}
	args = append(args, "--")
	args = append(args, spec.Command...)
	cmd := sys.Command(j.cfg.Shim, args...)
	if j.cfg.Spawner != nil {
		code, err := j.cfg.Spawner.Spawn(ctx, cmd, spec.Stdin, spec.Stdout, spec.Stderr, extra...)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: %w", id, err)
		}
		return code, nil
	}
	if spec.Stdin != nil {
		in, err := io.ReadAll(spec.Stdin)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: stdin: %w", id, err)
		}
		cmd.Stdin = in
	}
	res, err := j.cfg.Runner.Run(ctx, cmd)
	if spec.Stdout != nil {
		spec.Stdout.Write(res.Stdout)
	}
	if spec.Stderr != nil {
		spec.Stderr.Write(res.Stderr)
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		if ee.Code == ShimExitPermanent {
			return -1, fmt.Errorf("exec in %s: %w: %s", id, ErrPermanent, strings.TrimSpace(ee.Stderr))
		}
		return ee.Code, nil
	}
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	return 0, nil
}

// forwardResizes writes each size to the shim's resize pipe, one line
// each, until sizes is closed, the exec ends (done) or the shim is gone.
func forwardResizes(w *os.File, sizes <-chan TermSize, done <-chan struct{}) {
	defer w.Close()
	for {
		select {
		case s, ok := <-sizes:
			if !ok {
				return
			}
			if _, err := io.WriteString(w, s.String()+"\n"); err != nil {
				return
			}
		case <-done:
			return
		}
	}
}

// firstExtraFD is the descriptor a spawned command gets its first extra
// file as, after its standard streams.
const firstExtraFD = 3

// Spawner runs a command with its standard streams attached and returns
// its exit code; err is for a command that could not run at all. The
// command gets extra files as descriptors firstExtraFD and on.
type Spawner interface {
	Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer, extra ...*os.File) (int, error)
}

// ExecSpawner is the Spawner of the host (os/exec).
type ExecSpawner struct{}

// Spawn implements Spawner.
func (ExecSpawner) Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer, extra ...*os.File) (int, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = extra
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
