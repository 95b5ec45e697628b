package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// labelCommand is kubectl label: set (KEY=VALUE) or remove (KEY-) the
// labels of objects named as get names them, without their manifests.
func (c *clusterCLI) labelCommand() *cobra.Command {
	var ns string
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "label KIND NAME... | KIND/NAME... KEY=VALUE... KEY-...",
		Short: "Set or remove labels of objects, as kubectl label does",
		Long: `Label sets (KEY=VALUE) or removes (KEY-) labels of the objects named, as
kubectl label does: legion label service web tier=front, or legion label
svc/web svc/api tier-. A label that has another value already is changed
only with --overwrite; nothing is changed on an object refused. Labels
select what network policies, constraints (node labels), legion get -l and
legion delete -l act on. The manifests the objects came from are not
changed: applied again, their labels come back.`,
		Args: cobra.ArbitraryArgs, // read below, saying what is missing
		RunE: func(cmd *cobra.Command, args []string) error {
			i := slices.IndexFunc(args, func(a string) bool { return strings.Contains(a, "=") || strings.HasSuffix(a, "-") })
			if i < 1 {
				return fmt.Errorf("label: expected the objects (KIND NAME... or KIND/NAME...), then KEY=VALUE or KEY- for each label")
			}
			objs, err := named("label", args[:i], ns)
			if err != nil {
				return fmt.Errorf("label: %w", err)
			}
			lc, err := parseLabelChanges(args[i:])
			if err != nil {
				return fmt.Errorf("label: %w", err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			// Each object in turn; one refused does not keep the others
			// from being labelled, and every refusal is said.
			var errs []error
			for _, o := range objs {
				m := o.GetMetadata()
				kind := o.GetKind()
				if !kind.Namespaced() {
					m.Namespace = ""
				}
				res, err := changeObject(ctxOf(cmd), cl, kind, m.Namespace, m.Name, func(o legion.Object) error {
					return relabel(o, lc, overwrite)
				})
				if err != nil {
					errs = append(errs, fmt.Errorf("label %s: %w", strings.ToLower(string(kind))+"/"+m.Name, err))
					continue
				}
				if res.Outcome == client.Unchanged {
					fmt.Fprintf(cmd.OutOrStdout(), "%s unchanged: its labels are so already\n", ref(res.Object))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s labelled: %s\n", ref(res.Object), labelPairs(res.Object.GetMetadata().Labels))
				if n, ok := res.Object.(*legion.Node); ok {
					c.sayUnmetConstraints(cmd, n)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the objects")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change a label that has another value already")
	return cmd
}

// relabel applies lc to o's labels; a label with another value is
// changed only with overwrite, as kubectl label does.
func relabel(o legion.Object, lc labelChanges, overwrite bool) error {
	m := o.GetMetadata()
	if !overwrite {
		for _, k := range slices.Sorted(maps.Keys(lc.set)) {
			if old, ok := m.Labels[k]; ok && old != lc.set[k] {
				return fmt.Errorf("label %s has the value %q already: --overwrite changes it", k, old)
			}
		}
	}
	m.Labels = lc.apply(m.Labels)
	return nil
}

// labelPairs is labels as KEY=VALUE in key order, space-separated, or
// <none>.
func labelPairs(labels map[string]string) string { return joinLabels(labels, " ") }
