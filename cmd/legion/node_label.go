package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// labelChanges are label edits as kubectl label takes them: k=v sets,
// k- removes.
type labelChanges struct {
	set    map[string]string
	remove []string
}

func parseLabelChanges(args []string) (labelChanges, error) {
	lc := labelChanges{set: map[string]string{}}
	for _, a := range args {
		switch k, v, ok := strings.Cut(a, "="); {
		case ok && k != "":
			lc.set[k] = v
		case !ok && strings.HasSuffix(a, "-") && len(a) > 1:
			lc.remove = append(lc.remove, strings.TrimSuffix(a, "-"))
		default:
			return lc, fmt.Errorf("label %q: expected KEY=VALUE to set it or KEY- to remove it", a)
		}
	}
	for _, k := range lc.remove {
		if _, both := lc.set[k]; both {
			return lc, fmt.Errorf("label %q is both set and removed", k)
		}
	}
	return lc, nil
}

func (lc labelChanges) apply(labels map[string]string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, lc.set)
	for _, k := range lc.remove {
		delete(labels, k)
	}
	return labels
}

// nodeLabelCommand is `legion node label NODE k=v k-`.
func (c *clusterCLI) nodeLabelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "label NODE KEY=VALUE... KEY-...",
		Short: "Set (KEY=VALUE) or remove (KEY-) a node's labels, which placement constraints read",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lc, err := parseLabelChanges(args[1:])
			if err != nil {
				return fmt.Errorf("node label: %w", err)
			}
			return c.updateNode(cmd, args[0], lc, "")
		},
	}
}

// nodeUpdateCommand is `legion node update NODE`, as docker node update.
func (c *clusterCLI) nodeUpdateCommand() *cobra.Command {
	var availability string
	var add, rm []string
	cmd := &cobra.Command{
		Use:   "update NODE",
		Short: "Change a node's availability and labels",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes := slices.Clone(add)
			for _, k := range rm {
				changes = append(changes, k+"-")
			}
			lc, err := parseLabelChanges(changes)
			if err != nil {
				return fmt.Errorf("node update: %w", err)
			}
			a := legion.Availability(availability)
			switch a {
			case "", legion.AvailabilityActive, legion.AvailabilityPause, legion.AvailabilityDrain:
			default:
				return fmt.Errorf("node update: --availability %q: expected active, pause or drain", availability)
			}
			if a == "" && len(changes) == 0 {
				return fmt.Errorf("node update: nothing to change: give --availability, --label-add or --label-rm")
			}
			return c.updateNode(cmd, args[0], lc, a)
		},
	}
	cmd.Flags().StringVar(&availability, "availability", "", "active, pause or drain")
	cmd.Flags().StringSliceVar(&add, "label-add", nil, "set a label, KEY=VALUE (repeatable)")
	cmd.Flags().StringSliceVar(&rm, "label-rm", nil, "remove a label, KEY (repeatable)")
	return cmd
}

// updateNode applies label changes and, when given, an availability.
func (c *clusterCLI) updateNode(cmd *cobra.Command, name string, lc labelChanges, a legion.Availability) error {
	res, err := c.updateObject(cmd, legion.KindNode, "", name, func(o legion.Object) error {
		n := o.(*legion.Node)
		n.Metadata.Labels = lc.apply(n.Metadata.Labels)
		if a != "" {
			n.Spec.Availability = a
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := res.Object.(*legion.Node)
	fmt.Fprintf(cmd.OutOrStdout(), "node/%s %s: %s, labels: %s\n", name, strings.ToLower(res.Outcome), n.Spec.Availability, labelPairs(n.Metadata.Labels))
	if len(lc.set) > 0 || len(lc.remove) > 0 {
		c.sayUnmetConstraints(cmd, n)
	}
	return nil
}

// sayUnmetConstraints warns of the replicated services whose tasks run
// on n and whose constraints n no longer meets: constraints are checked
// when a task is placed, so those tasks stay (a global service's task
// is stopped by the planner, which needs no word). Best effort: a
// listing that fails says nothing.
func (c *clusterCLI) sayUnmetConstraints(cmd *cobra.Command, n *legion.Node) {
	cl, err := c.connect(cmd)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx := ctxOf(cmd)
	all := client.ListOptions{AllNamespaces: true}
	svcs, _, err := cl.List(ctx, legion.KindService, all)
	if err != nil {
		return
	}
	tasks, _, err := cl.List(ctx, legion.KindTask, all)
	if err != nil {
		return
	}
	for _, w := range unmetConstraints(n, svcs, tasks) {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
	}
}

// unmetConstraints says, for each replicated service with tasks running
// on n that n's labels no longer let it place there, which constraint
// fails and what places them again.
func unmetConstraints(n *legion.Node, svcs, tasks []legion.Object) []string {
	running := map[string]int{} // namespace/service -> its live tasks on n
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Spec.Node == n.Metadata.Name && t.Spec.Owner.Kind == legion.KindService &&
			t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() {
			running[t.Metadata.Namespace+"/"+t.Spec.Owner.Name]++
		}
	}
	var out []string
	for _, o := range svcs {
		s := o.(*legion.Service)
		count := running[s.Metadata.Namespace+"/"+s.Metadata.Name]
		if count == 0 || s.Spec.Mode == legion.ModeGlobal {
			continue
		}
		cs, err := legion.ParseConstraints(s.Spec.Placement.Constraints)
		if err != nil {
			continue
		}
		for _, c := range cs {
			if c.Eval(n) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %d of its tasks run on node %s, which no longer meets its constraint %s: running tasks stay where they are (constraints are checked when a task is placed); legion rollout restart %s places them again",
				ref(s), count, n.Metadata.Name, c, ref(s)))
			break
		}
	}
	return out
}
