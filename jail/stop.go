package jail

import (
	"context"
	"strconv"
)

// AskStop signals the supervisor, which reads the stop request, sends the
// stop signal, waits the grace period and removes the jail.
func (d jailsDriver) AskStop(ctx context.Context, shimPid int) error {
	_, err := d.run(ctx, "kill", "-s", "TERM", strconv.Itoa(shimPid))
	return err
}

// Kill removes the container's jail, ending everything in it, and writes
// the exit record if the supervisor does not.
func (d jailsDriver) Kill(ctx context.Context, rec Record, _ RunInfo) error {
	if err := d.removeJail(ctx, rec.Jail); err != nil {
		return err
	}
	return d.Killed(ctx, rec.Spec.ID, ShimMargin, "jail removed; the supervisor wrote no exit status")
}

// Settle has nothing to do: a jail whose supervisor died is removed at
// the next start.
func (jailsDriver) Settle(context.Context, Record) error { return nil }
