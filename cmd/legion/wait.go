package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// What legion wait waits for.
const (
	waitReady    = "ready"    // a service rolled out, a node ready
	waitComplete = "complete" // a job completed
	waitDelete   = "delete"   // the object gone
)

// defaultWaitTimeout is how long legion wait waits for all it names,
// as kubectl wait's default.
const defaultWaitTimeout = 30 * time.Second

// waitCommand is kubectl wait: block until objects reach a state, for
// scripts, with the exit codes of a followed rollout.
func (c *clusterCLI) waitCommand() *cobra.Command {
	var ns, forWhat string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait KIND NAME... | KIND/NAME... [--for ready|complete|delete|jsonpath='{EXPR}'=VALUE]",
		Short: "Wait until services are rolled out, jobs complete, nodes ready, or objects deleted, as kubectl wait does",
		Long: `Wait follows each object named until it is as --for asks, printing where it
stands when that changes, as kubectl wait does for scripts:

  ready     a service: every task runs its pod as it is now and is ready
            (kubectl's condition=Available); a node: ready
  complete  a job: completed
  delete    any object: gone
  jsonpath='{EXPRESSION}'=VALUE
            any object: the field as -o jsonpath reads it equal to VALUE,
            or, without =VALUE, set (kubectl's form)

Without --for, a service and a node are waited for ready and a job for
complete. It exits 0 once all are, 1 when one cannot be any more (an
update paused or rolled back, a job failed, a node gone), and 2 when
--timeout (default 30s, for all together; 0 for no limit) passes first.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			objs, err := named("wait", args, ns)
			if err != nil {
				return fmt.Errorf("wait: %w", err)
			}
			var field *fieldWait
			if expr, ok := strings.CutPrefix(forWhat, "jsonpath="); ok {
				if field, err = parseFieldWait(expr); err != nil {
					return fmt.Errorf("wait: --for %w", err)
				}
			}
			conds := make([]string, len(objs))
			if field == nil {
				cond, err := waitCondition(forWhat)
				if err != nil {
					return fmt.Errorf("wait: %w", err)
				}
				for i, o := range objs {
					if conds[i], err = kindCondition(o.GetKind(), cond); err != nil {
						return fmt.Errorf("wait: %s/%s: %w", strings.ToLower(string(o.GetKind())), o.GetMetadata().Name, err)
					}
				}
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			// One deadline for all: each follow's own timeout, the same,
			// names it in what it says.
			ctx := ctxOf(cmd)
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			for i, o := range objs {
				m := o.GetMetadata()
				if !o.GetKind().Namespaced() {
					m.Namespace = ""
				}
				if field != nil {
					err = followField(ctx, cl, cmd.OutOrStdout(), o.GetKind(), m.Namespace, m.Name, field, timeout)
				} else {
					err = followObject(ctx, cl, cmd.OutOrStdout(), o.GetKind(), m.Namespace, m.Name, conds[i], timeout)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the objects")
	cmd.Flags().StringVar(&forWhat, "for", "", "ready, complete, delete or jsonpath='{EXPRESSION}'=VALUE (kubectl's condition=Available, condition=Complete too); default: ready for a service or node, complete for a job")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultWaitTimeout, "give up after this long, for all the objects together (0: no limit)")
	return cmd
}

// waitCondition reads --for, in Legion's words or kubectl's.
func waitCondition(s string) (string, error) {
	l := strings.ToLower(s)
	l = strings.TrimPrefix(l, "condition=")
	switch l {
	case "", waitReady, waitComplete, waitDelete:
		return l, nil
	case "available":
		return waitReady, nil
	}
	return "", fmt.Errorf("--for %s: expected ready (a service or node), complete (a job), delete, or jsonpath='{EXPRESSION}'=VALUE", s)
}

// kindCondition is the condition to wait for on an object of kind, given cond
// ("" for the kind's own), or why that kind has none such.
func kindCondition(kind legion.Kind, cond string) (string, error) {
	if cond == waitDelete {
		return cond, nil
	}
	own := map[legion.Kind]string{legion.KindService: waitReady, legion.KindNode: waitReady, legion.KindJob: waitComplete}[kind]
	switch {
	case own == "":
		return "", fmt.Errorf("a %s is waited for only to be deleted (--for delete); ready is for services and nodes, complete for jobs", kind)
	case cond != "" && cond != own:
		return "", fmt.Errorf("a %s is not waited for %s: it is waited for %s (or delete)", kind, cond, own)
	}
	return own, nil
}

// followObject follows one object until it is as cond says: a Service's
// rollout and a Job as apply --wait follows them, a Node until ready,
// anything until deleted. Exit codes are a followed rollout's.
func followObject(ctx context.Context, cl *client.Client, out io.Writer, kind legion.Kind, ns, name, cond string, timeout time.Duration) error {
	switch {
	case cond == waitDelete:
		return followDeleted(ctx, cl, out, kind, ns, name, timeout)
	case kind == legion.KindService:
		return followRollout(ctx, cl, out, ns, name, timeout, false)
	case kind == legion.KindJob:
		return followJob(ctx, cl, out, ns, name, timeout)
	case kind == legion.KindNode:
		return followNodeReady(ctx, cl, out, name, timeout)
	}
	return fmt.Errorf("%s/%s: nothing to wait for", kind, name)
}

// followNodeReady waits until a node is ready, printing its state when
// it changes; a node removed fails the wait.
func followNodeReady(ctx context.Context, cl *client.Client, out io.Writer, name string, timeout time.Duration) error {
	last := ""
	return pollObject(ctx, cl, legion.KindNode, "", name, timeout, func(o legion.Object, err error) (bool, error) {
		if err != nil {
			return false, &exitError{code: rolloutFailed, msg: fmt.Sprintf("node %s: not found (removed, or never joined)", name)}
		}
		n := o.(*legion.Node)
		state := string(n.Status.State)
		if n.Spec.Availability != legion.AvailabilityActive && n.Spec.Availability != "" {
			state += ", availability " + string(n.Spec.Availability)
		}
		if state != last {
			fmt.Fprintf(out, "node %s: %s\n", name, state)
			last = state
		}
		return n.Status.State == legion.NodeReady, nil
	}, func() string { return fmt.Sprintf("node %s: not ready within %s: %s", name, timeout, orDash(last)) })
}

// followDeleted waits until the object is gone.
func followDeleted(ctx context.Context, cl *client.Client, out io.Writer, kind legion.Kind, ns, name string, timeout time.Duration) error {
	what := refOf(kind, ns, name)
	said := false
	return pollObject(ctx, cl, kind, ns, name, timeout, func(_ legion.Object, err error) (bool, error) {
		if err != nil {
			fmt.Fprintf(out, "%s deleted\n", what)
			return true, nil
		}
		if !said {
			fmt.Fprintf(out, "%s still there\n", what)
			said = true
		}
		return false, nil
	}, func() string { return fmt.Sprintf("%s: not deleted within %s", what, timeout) })
}

// pollObject reads object kind ns/name every rolloutPoll and hands each
// read to step, with the error when it is not found, until step says it
// is done (nil) or fails. A read that fails for good otherwise (lasting)
// ends it; others (an election) are waited out. The follow's timeout
// passing first exits 2 saying timedOut.
func pollObject(ctx context.Context, cl *client.Client, kind legion.Kind, ns, name string, timeout time.Duration,
	step func(o legion.Object, notFound error) (bool, error), timedOut func() string) error {
	ctx, tick, stop := following(ctx, timeout)
	defer stop()
	for {
		o, err := cl.Get(ctx, kind, ns, name)
		switch {
		case err == nil || errors.Is(err, client.ErrNotFound):
			if done, err := step(o, err); done || err != nil {
				return err
			}
		case lasting(err):
			return err
		}
		select {
		case <-ctx.Done():
			if err := ctxErr(ctx, timeout); err != nil {
				return err
			}
			return &exitError{code: rolloutTimedOut, msg: timedOut()}
		case <-tick.C:
		}
	}
}

// ctxErr is the error of a follow whose context ended other than by its
// own timeout (the command interrupted), else nil.
func ctxErr(ctx context.Context, timeout time.Duration) error {
	if timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return ctx.Err()
}
