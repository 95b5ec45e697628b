package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// jobLine is where a Job stands, as a followed apply prints it.
func jobLine(j *legion.Job) string {
	st := j.Status
	s := fmt.Sprintf("%d of %d completions", st.Succeeded, max(j.Spec.Completions, 1))
	if j.Spec.Mode == legion.JobGlobal {
		s = fmt.Sprintf("%d completed", st.Succeeded)
	}
	s += fmt.Sprintf(", %d active, %d failed", st.Active, st.Failed)
	if st.State != "" && st.State != legion.JobRunning {
		s = string(st.State) + ": " + s
	}
	if st.Message != "" {
		s += "; " + st.Message
	}
	return s
}

// followJob prints a Job whenever it changes until it is over: exit 0
// once it completed, 1 once it failed (rolloutFailed), 2 on the timeout,
// as a followed rollout does. Reads that fail during an election are
// asked again.
func followJob(ctx context.Context, cl *client.Client, out io.Writer, ns, name string, timeout time.Duration) error {
	ctx, tick, stop := following(ctx, timeout)
	defer stop()
	var last string
	var rerr error
	for {
		o, err := cl.Get(ctx, legion.KindJob, ns, name)
		if lasting(err) {
			return err // deleted meanwhile, or not the caller's to read
		}
		if rerr = err; err == nil {
			j := o.(*legion.Job)
			if line := jobLine(j); line != last {
				fmt.Fprintf(out, "job %s/%s: %s\n", ns, name, line)
				last = line
			}
			switch j.Status.State {
			case legion.JobComplete:
				return nil
			case legion.JobFailed:
				return &exitError{code: rolloutFailed, msg: fmt.Sprintf("job %s/%s failed: %s", ns, name, j.Status.Message)}
			}
		}
		select {
		case <-ctx.Done():
			where := last
			if where == "" && rerr != nil {
				where = "not read: " + rerr.Error()
			}
			return &exitError{code: rolloutTimedOut, msg: fmt.Sprintf("job %s/%s: not complete within %s: %s", ns, name, timeout, where)}
		case <-tick.C:
		}
	}
}
