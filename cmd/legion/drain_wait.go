package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// drainPoll is how often `node drain --wait` asks where the drain stands.
const drainPoll = 500 * time.Millisecond

// Exit codes of `legion node drain --wait` (3.3.1).
const (
	drainCancelled = 1 // the node stopped draining before it completed
	drainTimedOut  = 2
)

// waitDrain follows a node's drain until it completes (nil), the node
// stops draining (exit 1) or the timeout passes (exit 2), printing the
// drain's state whenever it changes, or, with asJSON, its last state as
// JSON. A failed read (an election) is asked again.
func waitDrain(ctx context.Context, cl *client.Client, out, errw io.Writer, node string, timeout time.Duration, asJSON bool) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var last *legion.DrainStatus
	show := func(d *legion.DrainStatus) {
		if asJSON || (last != nil && last.State == d.State && slices.Equal(last.Remaining, d.Remaining)) {
			return
		}
		fmt.Fprintln(out, describeDrain(node, d))
	}
	end := func(code int, msg string) error {
		if asJSON && last != nil {
			b, _ := json.MarshalIndent(last, "", "  ")
			fmt.Fprintln(out, string(b))
		}
		if code == 0 {
			return nil
		}
		return &exitError{code: code, msg: msg}
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		o, err := cl.Get(ctx, legion.KindNode, "", node)
		if err == nil {
			n := o.(*legion.Node)
			if n.Spec.Availability != legion.AvailabilityDrain {
				return end(drainCancelled, fmt.Sprintf("node %s: the drain was cancelled (the node is %s)", node, n.Spec.Availability))
			}
			if d := n.Status.Drain; d != nil {
				show(d)
				last = d
				if d.State == legion.DrainCompleted {
					if tasks, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{AllNamespaces: true}); err == nil {
						if w := stranded(node, tasks); w != "" {
							fmt.Fprintln(errw, "warning: "+w)
						}
					}
					return end(0, "")
				}
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("node %s: the drain did not complete within %s", node, timeout)
			if last != nil {
				msg += ": " + describeDrain(node, last)
			}
			return end(drainTimedOut, msg)
		case <-tick.C:
		}
	}
}

// stranded says which tasks of the services and jobs that ran on a
// drained node wait for a node no node can be: the drain completed, the
// node is empty, and yet what ran there runs nowhere (a one-node
// cluster, constraints, resources). Empty when every one found a place.
func stranded(node string, tasks []legion.Object) string {
	type ownerRef struct {
		ns   string
		kind legion.Kind
		name string
	}
	ranThere := map[ownerRef]bool{}
	for _, o := range tasks {
		if t := o.(*legion.Task); t.Spec.Node == node && t.Spec.Owner.Name != "" {
			ranThere[ownerRef{t.Metadata.Namespace, t.Spec.Owner.Kind, t.Spec.Owner.Name}] = true
		}
	}
	var waiting []string
	reason := ""
	for _, o := range tasks {
		t := o.(*legion.Task)
		// The planner says why when it could place a task nowhere; one
		// without a message is still being placed.
		if !ranThere[ownerRef{t.Metadata.Namespace, t.Spec.Owner.Kind, t.Spec.Owner.Name}] || t.Spec.Node != "" ||
			t.Spec.DesiredState != legion.TaskRunning || t.Status.State != legion.TaskPending || t.Status.Message == "" {
			continue
		}
		waiting = append(waiting, t.Metadata.Namespace+"/"+t.Metadata.Name)
		if reason == "" {
			reason = t.Status.Message
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	slices.Sort(waiting)
	const shown = 5
	names := strings.Join(waiting[:min(len(waiting), shown)], ", ")
	if len(waiting) > shown {
		names += fmt.Sprintf(" and %d more", len(waiting)-shown)
	}
	return fmt.Sprintf("what ran on node %s has nowhere to run: %s pending (%s)", node, names, reason)
}

// nowhereElse says, for a drain asked without --wait, that the node's
// tasks have no other node to go to: none other is ready and active.
// Empty when one is, or when nothing runs on the node. (Constraints and
// resources the planner says per task; --wait reports those.)
func nowhereElse(node string, nodes, tasks []legion.Object) string {
	for _, o := range nodes {
		n := o.(*legion.Node)
		if n.Metadata.Name != node && n.Status.State == legion.NodeReady && n.Spec.Availability == legion.AvailabilityActive {
			return ""
		}
	}
	owners := map[string]bool{}
	count := 0
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Spec.Node == node && t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() {
			count++
			owners[strings.ToLower(string(t.Spec.Owner.Kind))+" "+t.Metadata.Namespace+"/"+t.Spec.Owner.Name] = true
		}
	}
	if count == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(owners))
	what := "1 task"
	if count != 1 {
		what = fmt.Sprintf("%d tasks", count)
	}
	return fmt.Sprintf("no other node is ready and active, so node %s's %s (of %s) will wait pending until one is; legion node activate %s ends the drain",
		node, what, strings.Join(names, ", "), node)
}

// describeDrain says where a drain stands and what is left, as one line.
func describeDrain(node string, d *legion.DrainStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: drain %s", node, d.State)
	if len(d.Remaining) > 0 {
		fmt.Fprintf(&b, ", %d left:", len(d.Remaining))
		for i, it := range d.Remaining {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s %s (%s)", strings.ToLower(string(it.Kind)), it.Name, it.Reason)
		}
	}
	return b.String()
}

// drainFlags are --wait, --timeout and -o of `node drain`.
type drainFlags struct {
	wait    bool
	timeout time.Duration
	output  string
	// kubectl drain's: the first is refused (a drain here stops what it
	// keeps), the others consent to what a drain here does anyway.
	ignoreDaemonSets, deleteEmptyDir, force bool
}

func (f *drainFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.wait, "wait", false, "follow the drain: exit 0 once completed, 1 if it is cancelled, 2 on the timeout")
	fl.DurationVar(&f.timeout, "timeout", 0, "with --wait, give up after this long (default: no limit)")
	fl.StringVarP(&f.output, "output", "o", "", "with --wait, json: print the drain's last state as JSON instead of following lines")
	fl.BoolVar(&f.ignoreDaemonSets, "ignore-daemonsets", false, "kubectl's: refused, a drain here stops global services' tasks")
	fl.BoolVar(&f.deleteEmptyDir, "delete-emptydir-data", false, "kubectl's: what a drain here does to tmpfs volumes anyway")
	fl.BoolVar(&f.deleteEmptyDir, "delete-local-data", false, "kubectl's older name of --delete-emptydir-data")
	fl.BoolVar(&f.force, "force", false, "kubectl's: every task here has an owner that replaces it")
	for _, h := range []string{"ignore-daemonsets", "delete-emptydir-data", "delete-local-data", "force"} {
		fl.MarkHidden(h)
	}
}

// kubectlNotes says what kubectl drain's consenting flags mean here.
func (f *drainFlags) kubectlNotes(w io.Writer) {
	if f.deleteEmptyDir {
		fmt.Fprintln(w, "note: --delete-emptydir-data: a drain here always stops tasks whose tmpfs volumes' data goes with them; it needs no flag")
	}
	if f.force {
		fmt.Fprintln(w, "note: --force: every task has a service or job that starts it again elsewhere; a drain here needs no flag for it")
	}
}

func (f *drainFlags) check() error {
	switch {
	case f.ignoreDaemonSets:
		return fmt.Errorf("node drain: --ignore-daemonsets: a drain here stops the tasks of global services too, as Swarm's does, where kubectl's leaves DaemonSets' pods; legion node pause NODE stops new placements and leaves every task running")
	case f.output != "" && f.output != "json":
		return fmt.Errorf("node drain: -o %q: expected json", f.output)
	case !f.wait && (f.timeout != 0 || f.output != ""):
		return fmt.Errorf("node drain: --timeout and -o apply only with --wait")
	case f.timeout < 0:
		return fmt.Errorf("node drain: --timeout %s: must not be negative", f.timeout)
	}
	return nil
}
