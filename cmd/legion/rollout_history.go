package main

import (
	"fmt"
	"io"
	"time"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// rolloutHistoryCommand is kubectl rollout history, as far as Legion
// keeps one: a service's spec and the one its last update came from
// (what legion rollback puts back), and what that update changed.
func (c *clusterCLI) rolloutHistoryCommand() *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "history SERVICE",
		Short: "Show what a service's last update changed and the spec it came from, which rollback puts back",
		Long: `History shows the service's images now and its last update's state, then
the spec that update came from, which legion rollback (rollout undo) puts
back, and a diff of the two. Legion keeps that one spec, not a list of
revisions as a Kubernetes Deployment's ReplicaSets do.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := oneServiceArg(args)
			if err != nil {
				return fmt.Errorf("rollout history: %w", err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			o, err := cl.Get(ctxOf(cmd), legion.KindService, ns, name)
			if err != nil {
				return fmt.Errorf("rollout history: %w", err)
			}
			return printHistory(cmd.OutOrStdout(), o.(*legion.Service), time.Now())
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	return cmd
}

// printHistory writes rollout history's view of s.
func printHistory(w io.Writer, s *legion.Service, now time.Time) error {
	fmt.Fprintf(w, "service %s: generation %d, images %s\n", legion.DisplayName(s), s.Metadata.Generation, imagesOf(s.Spec.Pod))
	u := s.Status.Update
	if u == nil || u.PreviousSpec == nil {
		fmt.Fprintln(w, "No update yet: there is no earlier spec to go back to.")
		return nil
	}
	line := "Last update: " + string(u.State)
	if u.Started != nil {
		line += ", started " + age(*u.Started, now) + " ago"
	}
	if u.Completed != nil {
		line += ", ended " + age(*u.Completed, now) + " ago"
	}
	if u.Failure != "" {
		line += ": " + u.Failure
	}
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, "It came from images %s; legion rollback (rollout undo) puts that spec back.\n", imagesOf(u.PreviousSpec.Pod))
	prev := legion.Clone(s).(*legion.Service)
	prev.Spec = *u.PreviousSpec
	before, after, err := diffViews(prev, s)
	if err != nil {
		return err
	}
	fmt.Fprint(w, unifiedDiff("before the update", "now", string(before), string(after)))
	return nil
}
