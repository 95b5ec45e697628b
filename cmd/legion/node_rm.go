package main

import (
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// nodeRemoveCommand is legion node rm, Docker's word for deleting a
// Node, with Docker's guard: a node still heard from is refused unless
// forced, as removing it starts its tasks elsewhere without a drain's
// grace while they run on until the node hears of it, and refuses its
// certificate from then on.
func (c *clusterCLI) nodeRemoveCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm NODE",
		Aliases: []string{"remove"},
		Short:   "Remove a node that is down from the cluster (--force: one that is not)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := ctxOf(cmd)
			o, err := cl.Get(ctx, legion.KindNode, "", args[0])
			if err != nil {
				return err
			}
			if err := mayRemoveNode(o.(*legion.Node), force); err != nil {
				return err
			}
			gone, err := cl.Delete(ctx, legion.KindNode, "", args[0], nil)
			if err != nil {
				return err
			}
			confirm(cmd.OutOrStdout(), string(legion.KindNode), gone.GetMetadata().Name, "removed")
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove the node even though it is not down: its tasks run elsewhere, its certificate is refused, and its daemon stops its pods and exits when it hears so")
	return cmd
}

// mayRemoveNode refuses, unless forced, a node the cluster still hears
// from.
func mayRemoveNode(n *legion.Node, force bool) error {
	if force || n.Status.State == legion.NodeDown {
		return nil
	}
	state := string(n.Status.State)
	if state == "" {
		state = "not known to be down"
	}
	return fmt.Errorf("node %s is %s: removing it starts its tasks elsewhere at once, while they run on there until it hears it was removed; drain it (legion node drain %s --wait) and stop its daemon, which is down after eight missed heartbeats, or remove it now with --force",
		n.Metadata.Name, state, n.Metadata.Name)
}
