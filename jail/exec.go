package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// Exec implements Runtime: the supervisor's exec mode enters the jail as
// the container's process does. Output is collected, then written.
func (j *Jails) Exec(ctx context.Context, id string, spec ExecSpec) (int, error) {
	if _, err := j.ExecTarget(ctx, id); err != nil {
		return -1, err
	}
	if spec.TTY && j.cfg.Spawner == nil {
		return -1, fmt.Errorf("exec in %s: a terminal needs a Spawner (the runner cannot stream)", id)
	}
	args := []string{"jail-shim", "exec", j.records.Path(id)}
	if spec.TTY {
		args = append(args, "-tty")
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
		code, err := j.cfg.Spawner.Spawn(ctx, cmd, spec.Stdin, spec.Stdout, spec.Stderr)
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

// Spawner runs a command with its standard streams attached and returns
// its exit code; err is for a command that could not run at all.
type Spawner interface {
	Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// ExecSpawner is the Spawner of the host (os/exec).
type ExecSpawner struct{}

// Spawn implements Spawner.
func (ExecSpawner) Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
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
