package jail

import (
	"context"
	"path/filepath"
	"strconv"
	"time"
)

// waitExit polls for a run's exit record until d has passed.
func (j *Jails) waitExit(ctx context.Context, id string, d time.Duration) (bool, error) {
	deadline := j.clock.Now().Add(d)
	for {
		if _, ok, err := j.records.Exit(id); ok || err != nil {
			return ok, err
		}
		if !j.clock.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-j.clock.After(pollEvery):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Stop implements Runtime: the supervisor sends the stop signal, waits the
// grace period and removes the jail. Should it not report, the runtime
// removes the jail itself.
func (j *Jails) Stop(ctx context.Context, id string, grace time.Duration) error {
	rec, err := j.records.Get(id)
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		return nil
	}
	st, err := j.status(ctx, rec)
	if err != nil || st.State != StateRunning {
		return err
	}
	if grace < 0 {
		grace = rec.Spec.Grace()
	}
	run, _, err := j.records.Run(id)
	if err != nil {
		return err
	}
	dir := j.records.Path(id)
	if err := WriteJSON(filepath.Join(dir, StopFile), StopRequest{Grace: grace}); err != nil {
		return err
	}
	if run.ShimPid != 0 {
		if _, err := j.run(ctx, "kill", "-s", "TERM", strconv.Itoa(run.ShimPid)); err != nil {
			j.log.Warn("supervisor did not take the stop request", "container", id, "err", err)
		}
	}
	if ok, err := j.waitExit(ctx, id, grace+ShimMargin); ok || err != nil {
		return err
	}
	return j.kill(ctx, rec)
}

// kill removes the container's jail, ending everything in it, and writes
// the exit record if the supervisor does not.
func (j *Jails) kill(ctx context.Context, rec Record) error {
	if err := j.removeJail(ctx, rec.Jail); err != nil {
		return err
	}
	ok, err := j.waitExit(ctx, rec.Spec.ID, ShimMargin)
	if ok || err != nil {
		return err
	}
	return WriteJSON(filepath.Join(j.records.Path(rec.Spec.ID), ExitFile), ExitInfo{
		Code: 137, Signal: "KILL", FinishedAt: j.clock.Now(),
		Message: "jail removed; the supervisor wrote no exit status",
	})
}
