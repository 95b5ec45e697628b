package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/legionbsd/legion/jail"
)

// Exec implements jail.Runtime: the command runs in the container's root
// (chrooted when root) as the container's process does, with the
// container's environment under spec.Env, in a session of its own that is
// killed when ctx ends.
func (r *Runtime) Exec(ctx context.Context, id string, spec jail.ExecSpec) (int, error) {
	if spec.TTY {
		return -1, fmt.Errorf("exec in %s: a terminal is not offered by the process runtime", id)
	}
	if err := spec.CheckTerminal(); err != nil {
		return -1, fmt.Errorf("exec in %s: %w: %w", id, jail.ErrPermanent, err)
	}
	rec, err := r.ExecTarget(ctx, id)
	if err != nil {
		return -1, err
	}
	ps, err := jail.ProcessFor(rec.Spec, spec.Command, spec.Env, spec.User, spec.WorkDir)
	if err != nil {
		return -1, execErr(id, err)
	}
	ps.Stdin, ps.Stdout, ps.Stderr, ps.Setsid = spec.Stdin, spec.Stdout, spec.Stderr, true
	if ps.Stdin == nil {
		// Never the daemon's own standard input.
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: %w", id, err)
		}
		defer devnull.Close()
		ps.Stdin = devnull
	}
	proc, err := starter().Start(ps)
	if err != nil {
		return -1, execErr(id, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-proc.Pid(), syscall.SIGKILL)
		case <-done:
		}
	}()
	code, _, err := proc.Wait()
	if ctx.Err() != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, ctx.Err())
	}
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	return code, nil
}

func execErr(id string, err error) error {
	var se *jail.StartError
	if errors.As(err, &se) && se.Permanent {
		return fmt.Errorf("exec in %s: %w: %w", id, jail.ErrPermanent, err)
	}
	return fmt.Errorf("exec in %s: %w", id, err)
}
