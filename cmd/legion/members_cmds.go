package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
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

// faultTolerance says how many voting managers the cluster may lose and
// still have the majority it needs to work, and what an even count
// costs: two managers tolerate no more loss than one, and are down more
// often. Empty when no manager votes (a status that lists none).
func faultTolerance(members []client.Member) string {
	voters, _ := countVoters(members)
	if voters == 0 {
		return ""
	}
	majority := server.Majority(voters)
	lose := voters - majority
	s := fmt.Sprintf("the loss of %d of its %d voting managers (a majority, %d, keeps it working)", lose, voters, majority)
	switch {
	case voters == 1:
		s = "no loss of its one manager (three tolerate the loss of one)"
	case voters == 2:
		s = "no loss of either of its two managers, so two are less available than one (either's loss stops the cluster); add a third"
	case voters%2 == 0:
		s += fmt.Sprintf(": %d would tolerate as many; add one for the loss of %d", voters-1, lose+1)
	}
	return s
}

// noLeaderWhy says why a status names no leader, from the managers'
// reachability as the manager asked saw it: an election under way, or
// too few voters answering for one to be won.
func noLeaderWhy(members []client.Member) string {
	voters, up := countVoters(members)
	if frozen(members) {
		return fmt.Sprintf("%d of the %d voting managers answer, and electing one takes %d: the cluster is frozen until more are back", up, voters, server.Majority(voters))
	}
	return "an election is in progress"
}

// frozen reports whether too few voting managers answer for a leader to
// be elected.
func frozen(members []client.Member) bool {
	voters, up := countVoters(members)
	return voters > 1 && up < server.Majority(voters)
}

// frozenRecovery is how a frozen cluster whose missing managers are gone
// for good starts again: from a survivor's own store.
const frozenRecovery = "if they are gone for good, stop this manager's daemon, run legion restore --data-dir DIR on its data directory (a cluster of one from its own store), start it again and join other managers from empty data directories"

// countVoters counts the voting managers of a status, and those of them
// not seen Unreachable.
func countVoters(members []client.Member) (voters, up int) {
	for _, m := range members {
		if m.Voter {
			voters++
			if m.Reachability != server.ReachUnreachable {
				up++
			}
		}
	}
	return voters, up
}
