package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// suffrageCommand is legion node promote or demote: a manager's vote in
// Raft. A worker becomes a manager only by joining again with the
// manager token; the cluster says so when asked to promote one.
func (c *clusterCLI) suffrageCommand(voter bool) *cobra.Command {
	use, short, done, already := "demote NODE", "Take a manager's vote in Raft (it keeps serving as a non-voting manager)", "demoted", "not a voter already"
	if voter {
		use, short, done, already = "promote NODE", "Give a non-voting manager a vote in Raft", "promoted", "a voter already"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			changed, err := cl.SetVoter(ctxOf(cmd), args[0], voter)
			if err != nil {
				return err
			}
			if changed {
				confirm(cmd.OutOrStdout(), string(legion.KindNode), args[0], done)
			} else {
				confirm(cmd.OutOrStdout(), string(legion.KindNode), args[0], "unchanged:", already)
			}
			return nil
		},
	}
}

// printManagers lists the managers as docker node ls shows their manager
// status: Leader, Reachable or Unreachable, and whether each votes.
func printManagers(out io.Writer, members []client.Member) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tADDRESS\tSTATUS\tRAFT")
	for _, m := range members {
		raft := "voter"
		if !m.Voter {
			raft = "non-voter"
		}
		reach := m.Reachability
		if reach == "" {
			reach = "unknown" // a manager of an older version answered
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.ID, m.Address, reach, raft)
	}
	tw.Flush()
}
