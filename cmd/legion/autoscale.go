package main

import (
	"fmt"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// defaultCPUPercent is the target autoscale sets when given none, as
// kubectl autoscale's default policy does.
const defaultCPUPercent = 80

// autoscaleCommand is kubectl autoscale: a service's spec.autoscale set
// from flags, or removed with --off, without its manifest.
func (c *clusterCLI) autoscaleCommand() *cobra.Command {
	var ns string
	var a legion.Autoscale
	var downDelay time.Duration
	var off bool
	cmd := &cobra.Command{
		Use:   "autoscale SERVICE --max N [--min N] [--cpu-percent P] [--memory-percent P] | SERVICE --off",
		Short: "Have a service's replica count follow its tasks' use, as kubectl autoscale does",
		Long: `Autoscale sets a replicated service's spec.autoscale: the planner keeps its
replica count from --min (default 1) to --max, adding tasks when their
ready tasks' average use is above --cpu-percent or --memory-percent of
what their containers request, and removing them once it has been below
for --down-delay (default 5m). With neither target, the CPU target is 80%,
as kubectl autoscale's default policy. The containers must request what a
target is a percentage of (resources.requests.cpu or .memory).

The count set now is moved into the bounds when outside them. --off
removes autoscaling and keeps the count the autoscaler had reached. The
manifest the service was applied from is not changed: apply it again and
its own autoscale (or none) comes back.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := oneServiceArg(args)
			if err != nil {
				return fmt.Errorf("autoscale: %w", err)
			}
			set := cmd.Flags().Changed
			if off {
				for _, f := range []string{"min", "max", "cpu-percent", "memory-percent", "down-delay"} {
					if set(f) {
						return fmt.Errorf("autoscale: --off removes autoscaling: --%s has no meaning with it", f)
					}
				}
			} else {
				if !set("max") {
					return fmt.Errorf("autoscale: --max is required: the most replicas the service may have")
				}
				if a.CPU == 0 && a.Memory == 0 && !set("cpu-percent") && !set("memory-percent") {
					a.CPU = defaultCPUPercent
				}
				if set("down-delay") {
					d := legion.Duration(downDelay)
					a.DownDelay = &d
				}
			}
			var kept int
			res, err := c.updateService(cmd, ns, name, func(s *legion.Service) error {
				if off {
					kept = turnOffAutoscale(s)
					return nil
				}
				return setAutoscale(s, a)
			})
			if err != nil {
				return fmt.Errorf("autoscale: %w", err)
			}
			out := cmd.OutOrStdout()
			switch {
			case off && res.Outcome == client.Unchanged:
				fmt.Fprintf(out, "%s unchanged: it does not autoscale\n", ref(res.Object))
			case off:
				fmt.Fprintf(out, "%s autoscale off: it keeps %s\n", ref(res.Object), replicasWord(kept))
			case res.Outcome == client.Unchanged:
				fmt.Fprintf(out, "%s unchanged: it autoscales so already (%s)\n", ref(res.Object), autoscaleSpec(&a))
			default:
				s := res.Object.(*legion.Service)
				fmt.Fprintf(out, "%s autoscaled: %s; %s now\n", ref(res.Object), autoscaleSpec(s.Spec.Autoscale), replicasWord(*s.Spec.Replicas))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	f.IntVar(&a.Min, "min", 1, "the fewest replicas")
	f.IntVar(&a.Max, "max", 0, "the most replicas (required)")
	f.IntVar(&a.CPU, "cpu-percent", 0, "target average CPU use, percent of the containers' CPU requests (default 80 when no target is given)")
	f.IntVar(&a.Memory, "memory-percent", 0, "target average memory use, percent of the containers' memory requests")
	f.DurationVar(&downDelay, "down-delay", 0, "how long use stays below target before tasks are removed (default 5m)")
	f.BoolVar(&off, "off", false, "stop autoscaling, keeping the replica count it reached")
	return cmd
}

// setAutoscale gives s autoscaling a, with its replica count moved into
// a's bounds (admission refuses a count outside them). Admission checks
// the rest: mode, targets, requests.
func setAutoscale(s *legion.Service, a legion.Autoscale) error {
	if a.DownDelay == nil && s.Spec.Autoscale != nil {
		a.DownDelay = s.Spec.Autoscale.DownDelay // kept unless asked
	}
	n := s.WantedReplicas()
	s.Spec.Autoscale = &a
	n = min(max(n, a.Min), max(a.Max, a.Min))
	s.Spec.Replicas = &n
	return nil
}

// turnOffAutoscale removes s's autoscaling and returns the replica count
// it keeps: the autoscaler's, so that turning it off moves no task.
func turnOffAutoscale(s *legion.Service) int {
	n := s.WantedReplicas()
	if s.Spec.Autoscale != nil {
		s.Spec.Autoscale = nil
		s.Spec.Replicas = &n
	}
	return n
}

func replicasWord(n int) string { return counted(n, "replica") }
