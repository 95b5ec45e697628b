package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// taintChanges are taint edits as kubectl taint takes them:
// KEY[=VALUE]:EFFECT adds one, KEY:EFFECT- removes the taint of that key
// and effect, KEY- every taint of the key.
type taintChanges struct {
	add    []legion.Taint
	remove []legion.Taint // Effect empty: every effect of the key
}

func parseTaintChanges(args []string) (taintChanges, error) {
	var tc taintChanges
	for _, a := range args {
		spec, removing := strings.CutSuffix(a, "-")
		keyValue, effect, hasEffect := strings.Cut(spec, ":")
		key, value, _ := strings.Cut(keyValue, "=")
		t := legion.Taint{Key: key, Value: value, Effect: legion.TaintEffect(effect)}
		switch {
		case key == "":
			return tc, fmt.Errorf("taint %q: expected KEY[=VALUE]:EFFECT to add it, or KEY[:EFFECT]- to remove it", a)
		case hasEffect && !slices.Contains([]legion.TaintEffect{legion.NoSchedule, legion.PreferNoSchedule, legion.NoExecute}, t.Effect):
			return tc, fmt.Errorf("taint %q: effect %q: expected NoSchedule, PreferNoSchedule or NoExecute", a, effect)
		case removing:
			t.Value = "" // kubectl matches a removal by key and effect
			tc.remove = append(tc.remove, t)
		case !hasEffect:
			return tc, fmt.Errorf("taint %q: no effect: expected KEY[=VALUE]:EFFECT (NoSchedule, PreferNoSchedule or NoExecute)", a)
		default:
			tc.add = append(tc.add, t)
		}
	}
	for _, r := range tc.remove {
		if slices.ContainsFunc(tc.add, func(t legion.Taint) bool { return removes(r, t) }) {
			return tc, fmt.Errorf("taint %s is both added and removed", r)
		}
	}
	return tc, nil
}

// apply gives a node's taints after the changes. A taint of a key and
// effect the node has already changes its value only with overwrite, and
// a removal must find what it removes, as with kubectl taint.
func (tc taintChanges) apply(node string, taints []legion.Taint, overwrite bool) ([]legion.Taint, error) {
	out := slices.Clone(taints)
	for _, r := range tc.remove {
		n := len(out)
		out = slices.DeleteFunc(out, func(t legion.Taint) bool { return removes(r, t) })
		if len(out) == n {
			return nil, fmt.Errorf("node %s has no taint %s", node, r)
		}
	}
	for _, t := range tc.add {
		i := slices.IndexFunc(out, func(have legion.Taint) bool { return have.Key == t.Key && have.Effect == t.Effect })
		switch {
		case i < 0:
			out = append(out, t)
		case out[i].Value != t.Value && !overwrite:
			return nil, fmt.Errorf("node %s has the taint %s already: --overwrite changes it to %s", node, out[i], t)
		default:
			out[i] = t
		}
	}
	return out, nil
}

// untolerating is, for each of taints, the tasks running on node whose
// Service or Job does not tolerate it: what a NoExecute taint stops, to be
// said as a drain names what it moves. Best effort: a listing that fails
// gives none.
func (c *clusterCLI) untolerating(cmd *cobra.Command, node string, taints []legion.Taint) map[legion.Taint][]string {
	if len(taints) == 0 {
		return nil
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil
	}
	defer cl.Close()
	ctx, all := ctxOf(cmd), client.ListOptions{AllNamespaces: true}
	tolerations := map[string][]legion.Toleration{} // kind/namespace/name of an owner
	for _, kind := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := cl.List(ctx, kind, all)
		if err != nil {
			return nil
		}
		for _, o := range objs {
			m := o.GetMetadata()
			key := string(kind) + "/" + m.Namespace + "/" + m.Name
			switch v := o.(type) {
			case *legion.Service:
				tolerations[key] = v.Spec.Placement.Tolerations
			case *legion.Job:
				tolerations[key] = v.Spec.Placement.Tolerations
			}
		}
	}
	tasks, _, err := cl.List(ctx, legion.KindTask, all)
	if err != nil {
		return nil
	}
	stopped := map[legion.Taint][]string{}
	for _, o := range tasks {
		tk := o.(*legion.Task)
		if tk.Spec.Node != node || tk.Spec.DesiredState != legion.TaskRunning || tk.Status.State.Terminal() {
			continue
		}
		tols := tolerations[string(tk.Spec.Owner.Kind)+"/"+tk.Metadata.Namespace+"/"+tk.Spec.Owner.Name]
		for _, t := range taints {
			if !slices.ContainsFunc(tols, func(x legion.Toleration) bool { return x.Covers(legion.Toleration(t)) }) {
				stopped[t] = append(stopped[t], tk.Metadata.Namespace+"/"+tk.Metadata.Name)
			}
		}
	}
	for _, names := range stopped {
		slices.Sort(names)
	}
	return stopped
}

// removes: removal r (a key, and an effect unless empty) takes taint t.
func removes(r, t legion.Taint) bool {
	return r.Key == t.Key && (r.Effect == "" || r.Effect == t.Effect)
}

// nodeTaintCommand is `legion node taint NODE KEY=VALUE:EFFECT KEY-`, as
// kubectl taint nodes.
func (c *clusterCLI) nodeTaintCommand() *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "taint NODE KEY[=VALUE]:EFFECT... KEY[:EFFECT]-...",
		Short: "Add or remove a node's taints, which keep off the tasks that do not tolerate them, as kubectl taint does",
		Long: `Add (KEY[=VALUE]:EFFECT) or remove (KEY:EFFECT-, or KEY- for every effect)
a node's taints, as kubectl taint nodes does. NoSchedule keeps new tasks
that do not tolerate it off the node, and those already there stay;
NoExecute also stops those already there, which run elsewhere;
PreferNoSchedule makes the node a last choice. A taint of a key and effect
the node has already takes another value only with --overwrite.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := parseTaintChanges(args[1:])
			if err != nil {
				return fmt.Errorf("node taint: %w", err)
			}
			name := strings.TrimPrefix(strings.TrimPrefix(args[0], "node/"), "nodes/")
			// Read before the write: the planner stops them at once after.
			var noExecute []legion.Taint
			for _, t := range tc.add {
				if t.Effect == legion.NoExecute {
					noExecute = append(noExecute, t)
				}
			}
			evicts := c.untolerating(cmd, name, noExecute)
			res, err := c.updateObject(cmd, legion.KindNode, "", name, func(o legion.Object) error {
				n := o.(*legion.Node)
				taints, err := tc.apply(name, n.Spec.Taints, overwrite)
				if err != nil {
					return err
				}
				n.Spec.Taints = taints
				return nil
			})
			if err != nil {
				return fmt.Errorf("node taint: %w", err)
			}
			n := res.Object.(*legion.Node)
			var now []string
			for _, t := range n.Spec.Taints {
				now = append(now, t.String())
			}
			if len(now) == 0 {
				now = []string{"none"}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node/%s %s: taints %s\n", name, strings.ToLower(res.Outcome), strings.Join(now, ", "))
			for _, t := range tc.add {
				if tasks := evicts[t]; len(tasks) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s stops the tasks on node %s that do not tolerate it: %s (each runs elsewhere if a node can take it; legion tasks says where)\n",
						t, name, strings.Join(tasks, ", "))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change the value of a taint the node has already")
	return cmd
}
