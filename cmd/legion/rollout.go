package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/scheduler"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
)

// rolloutPoll is how often a rollout is looked at while followed.
const rolloutPoll = 500 * time.Millisecond

// unpublishedCheck bounds the look at the nodes' unserved ports after a
// followed rollout timed out.
const unpublishedCheck = 5 * time.Second

// Exit codes of a followed rollout (rollout status, --wait).
const (
	rolloutFailed   = 1 // paused, rolled back, or its rollback paused
	rolloutTimedOut = 2
)

// rollout is where a service's rollout stands, as read once.
type rollout struct {
	state   string // "", or the update's state
	failure string // why the update a rollback undoes failed
	want    int    // replicas wanted now
	current int    // live tasks running the pod as it is now
	ready   int    // of those, ready
	// complete: tasks of the pod as it is now that exited 0 and that
	// the restart policy (none, on-failure) leaves so: a one-shot that
	// ran, such as a migration, done as much as a ready task is.
	complete int
	failing  string          // the latest failed task's message
	pending  int             // current tasks no node runs yet
	waiting  string          // why one of them waits, as the planner says
	settled  bool            // the planner has seen the service's last spec
	svc      *legion.Service // as read
	// rollback: a rolled-back update is an end, not a failure: what is
	// followed is a rollback asked for, or a scale (which starts no
	// update and leaves the last one's state as it was).
	rollback bool
}

func (r rollout) done() bool {
	end := r.state == "" || r.state == string(legion.UpdateCompleted) || r.state == string(legion.UpdateRolledBack) && !r.rolledBackFailed()
	return r.settled && end && r.current+r.complete == r.want && r.ready+r.complete == r.want
}

func (r rollout) failed() bool {
	switch legion.UpdateState(r.state) {
	case legion.UpdatePaused, legion.UpdateRollbackPaused:
		return r.settled
	case legion.UpdateRolledBack:
		return r.settled && r.rolledBackFailed()
	}
	return false
}

// failedError is a failed rollout's end: exit 1, saying how it stands.
func (r rollout) failedError(ns, name string) error {
	msg := fmt.Sprintf("service %s/%s: the update is %s", ns, name, r.state)
	if r.failure != "" && r.state == string(legion.UpdateRolledBack) {
		msg += ": " + r.failure
	}
	return &exitError{code: rolloutFailed, msg: msg}
}

// rolledBackFailed: the update was rolled back because it failed, which
// ends a follow as a failure unless a rollback (or a scale) is what is
// followed. A rollback asked for, done, is an end like a completed
// update.
func (r rollout) rolledBackFailed() bool {
	return r.failure != "" && !r.rollback
}

func (r rollout) String() string {
	s := fmt.Sprintf("%d of %d tasks updated, %d ready", r.current+r.complete, r.want, r.ready)
	if r.complete > 0 {
		s += fmt.Sprintf(", %d complete", r.complete)
	}
	if r.current > r.want {
		// A scale down before the planner stops the extra tasks.
		s = fmt.Sprintf("%d of %d tasks updated and %d more to stop, %d ready", r.want, r.want, r.current-r.want, r.ready)
	}
	state := r.state
	if state == string(legion.UpdateCompleted) && !r.done() {
		// The last update's end: what goes on now is a scale or tasks
		// coming back, which no update state describes.
		state = ""
	}
	if state != "" {
		s = state + ": " + s
	}
	for _, w := range r.why() {
		s += "; " + w
	}
	return s
}

// why is what holds the rollout up: what the planner says on the
// service while it is short of tasks (images held by a policy, say, when
// no task is made to say it), how many tasks wait for a node and why, and
// the last failure.
func (r rollout) why() []string {
	var out []string
	if r.svc != nil && r.svc.Status.Message != "" && r.current < r.want {
		out = append(out, r.svc.Status.Message)
	}
	if r.pending > 0 {
		w := fmt.Sprintf("%d pending", r.pending)
		if r.waiting != "" {
			w += ": " + r.waiting
		}
		out = append(out, w)
	}
	// The planner's message on a slot that keeps failing to start ends
	// with that failure: said once.
	if r.failing != "" && !slices.ContainsFunc(out, func(w string) bool { return strings.HasSuffix(w, ": "+r.failing) }) {
		out = append(out, "last failure: "+r.failing)
	}
	return out
}

// readRollout reads a service and its tasks.
func readRollout(ctx context.Context, cl *client.Client, ns, name string) (rollout, error) {
	o, err := cl.Get(ctx, legion.KindService, ns, name)
	if err != nil {
		return rollout{}, err
	}
	s := o.(*legion.Service)
	r := rollout{want: s.Status.Replicas, settled: s.Status.ObservedGeneration >= s.Metadata.Generation, svc: s}
	if s.Spec.Mode != legion.ModeGlobal && s.Status.Replicas == 0 && s.Spec.Replicas != nil {
		r.want = *s.Spec.Replicas
	}
	if u := s.Status.Update; u != nil {
		r.state, r.failure = string(u.State), u.Failure
	}
	tasks, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: ns, Labels: map[string]string{"legion.service": name}})
	if err != nil {
		return rollout{}, err
	}
	var lastFail time.Time
	stays := s.Spec.Pod.KeepsCompleted()
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Spec.Owner.Kind != legion.KindService || t.Spec.Owner.Name != name {
			continue
		}
		if t.Status.State == legion.TaskFailed && t.Status.Timestamp.After(lastFail) {
			lastFail, r.failing = t.Status.Timestamp, t.Status.Message
		}
		if stays && t.Spec.DesiredState == legion.TaskRunning && t.Status.State == legion.TaskComplete && samePod(t, s) {
			r.complete++
		}
		if t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() && samePod(t, s) {
			r.current++
			if t.Status.Ready {
				r.ready++
			}
			if t.Status.State == legion.TaskPending || t.Status.State == "" {
				r.pending++
				r.waiting = cmp.Or(r.waiting, t.Status.Message)
			}
		}
	}
	return r, nil
}

// samePod reports whether the task runs the service's pod as it is now.
func samePod(t *legion.Task, s *legion.Service) bool {
	return t.Spec.PodHash != "" && t.Spec.PodHash == scheduler.PodHash(&s.Spec.Pod)
}

// following is what a follow waits with: ctx ended by timeout (none
// when 0), and a tick every rolloutPoll to read again on; stop releases
// both.
func following(ctx context.Context, timeout time.Duration) (context.Context, *time.Ticker, func()) {
	cancel := func() {}
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	tick := time.NewTicker(rolloutPoll)
	return ctx, tick, func() { tick.Stop(); cancel() }
}

// lasting says whether a failed read fails again however long a follow
// waits, so the follow ends with it: the object is gone, or the caller
// may not read it. The rest (an election, a manager restarting) is waited
// out.
func lasting(err error) bool {
	if errors.Is(err, client.ErrNotFound) {
		return true // also what the CLI says of a name nothing has
	}
	switch client.Code(err) {
	case codes.NotFound, codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return true
	}
	return false
}

// followRollout prints the rollout whenever it changes until it is done
// (nil), fails (exit 1) or the timeout passes (exit 2). Reads that fail
// during an election are asked again.
func followRollout(ctx context.Context, cl *client.Client, out io.Writer, ns, name string, timeout time.Duration, rollback bool) error {
	ctx, tick, stop := following(ctx, timeout)
	defer stop()
	var last string
	var r rollout // as last read: a read cut short by the timeout leaves it
	var rerr error
	for {
		cur, err := readRollout(ctx, cl, ns, name)
		if lasting(err) {
			return err // not an election's to wait out: nothing to follow, or not for this caller
		}
		if rerr = err; err == nil {
			r = cur
			r.rollback = rollback
			if line := r.String(); line != last {
				fmt.Fprintf(out, "service %s/%s: %s\n", ns, name, line)
				last = line
			}
			switch {
			case r.done():
				sayUnpublished(ctx, cl, out, r.svc)
				return nil
			case r.failed():
				sayUnpublished(ctx, cl, out, r.svc)
				return r.failedError(ns, name)
			}
		}
		select {
		case <-ctx.Done():
			where := r.String()
			if last == "" && rerr != nil {
				where = "not read: " + rerr.Error()
			}
			if r.svc != nil {
				// The wait is over, not what is worth saying of it.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unpublishedCheck)
				sayUnpublished(sctx, cl, out, r.svc)
				cancel()
			}
			return &exitError{code: rolloutTimedOut, msg: fmt.Sprintf("service %s/%s: not rolled out within %s: %s", ns, name, timeout, where)}
		case <-tick.C:
		}
	}
}

// sayUnpublished adds to a followed rollout's end (completed, paused,
// rolled back or timed out) the published ports of the service that a
// node reports it cannot serve (warnUnpublished).
func sayUnpublished(ctx context.Context, cl *client.Client, out io.Writer, s *legion.Service) {
	warnUnpublished(out, []*legion.Service{s}, listWith(ctx, cl))
}

// waitFlags are --wait and --timeout of the commands that change a
// service.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (f *waitFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.wait, "wait", false, "follow the rollout: exit 0 once every task runs the service's pod and is ready, 1 if the update pauses or its failure rolls it back, 2 on the timeout")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "with --wait, give up after this long (default: no limit)")
}

func (f *waitFlags) check() error {
	if f.timeout != 0 && !f.wait {
		return fmt.Errorf("--timeout applies only with --wait")
	}
	return nil
}

func (c *clusterCLI) rolloutCommand() *cobra.Command {
	var ns string
	var timeout time.Duration
	watch := true
	status := &cobra.Command{
		Use:   "status SERVICE",
		Short: "Follow a service's rollout until it completes, pauses or rolls back",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := oneServiceArg(args)
			if err != nil {
				return fmt.Errorf("rollout status: %w", err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			if !watch {
				// kubectl's --watch=false: where it stands, once; 1 only
				// for a rollout that failed.
				r, err := readRollout(ctxOf(cmd), cl, ns, name)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "service %s/%s: %s\n", ns, name, r.String())
				if r.failed() {
					return r.failedError(ns, name)
				}
				return nil
			}
			return followRollout(ctxOf(cmd), cl, cmd.OutOrStdout(), ns, name, timeout, false)
		},
	}
	status.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	status.Flags().BoolVarP(&watch, "watch", "w", true, "follow the rollout until it ends; false prints where it stands once (exit 1 only if it failed)")
	status.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (default: no limit)")
	// kubectl rollout undo is Swarm's (and Legion's) rollback.
	undo := c.rollbackCommand()
	undo.Use, undo.Short = "undo SERVICE", "Put back the spec a service had before its last update (legion rollback)"
	history := c.rolloutHistoryCommand()
	// kubectl's revisions, hidden: a service keeps one spec before its
	// last update, so only the previous one (kubectl's 0) is taken.
	oneRevision := "a service keeps the one spec it had before its last update, not numbered revisions: legion rollout history SERVICE shows it, and rollout undo SERVICE puts it back"
	for _, r := range []struct {
		cmd  *cobra.Command
		flag string
	}{{undo, "to-revision"}, {history, "revision"}} {
		f := r.cmd.Flags().VarPF(&kubectlFlag{ok: func(v string) bool { return v == "0" }, why: oneRevision}, r.flag, "", "kubectl's")
		f.Hidden = true
	}
	cmd := &cobra.Command{Use: "rollout", Short: "Follow, restart and undo services' rollouts, and show the last one"}
	cmd.AddCommand(status, c.rolloutRestartCommand(), undo, history)
	return cmd
}

// restart is rollout restart's change, at now: a Service's pod restarted
// then.
func restart(now time.Time) func(legion.Object) error {
	return func(o legion.Object) error {
		at := now.UTC()
		o.(*legion.Service).Spec.Pod.RestartedAt = &at
		return nil
	}
}

// rolloutRestartCommand is legion rollout restart: a new
// spec.pod.restartedAt, which changes the pod, so the planner replaces
// the service's tasks as an update does (parallelism, order, monitor,
// failure action). What the running tasks started with, the values of
// Secrets and Configs among it, is taken anew by their replacements.
func (c *clusterCLI) rolloutRestartCommand() *cobra.Command {
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "restart SERVICE",
		Short: "Replace a service's tasks in a rolling update, as its update settings say (so they take new Secret and Config values)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("rollout restart: %w", err)
			}
			name, err := oneServiceArg(args)
			if err != nil {
				return fmt.Errorf("rollout restart: %w", err)
			}
			res, err := c.updateObject(cmd, legion.KindService, ns, name, restart(time.Now()))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s restarting: its tasks are replaced in a rolling update\n", ref(res.Object))
			return c.waitRollout(cmd, wf, ns, name, false)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	wf.add(cmd)
	return cmd
}

// waitRollout follows the service's rollout when --wait was given.
func (c *clusterCLI) waitRollout(cmd *cobra.Command, wf waitFlags, ns, name string, rollback bool) error {
	if !wf.wait {
		return nil
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	return followRollout(ctxOf(cmd), cl, cmd.OutOrStdout(), ns, name, wf.timeout, rollback)
}
