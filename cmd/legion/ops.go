package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// addOpsCommands adds the everyday operations on a running cluster:
// scale, rollback, node availability and task listing. They share the
// root's --server and --credentials.
func addOpsCommands(root *cobra.Command) {
	cli := &clusterCLI{v: viper.New()}
	cli.v.BindEnv("server", "LEGION_SERVER")
	cli.v.BindEnv("credentials", "LEGION_CREDENTIALS")
	node := &cobra.Command{Use: "node", Short: "List nodes, set their availability, promote and demote managers"}
	node.AddCommand(cli.nodeListCommand(),
		cli.availabilityCommand("drain", legion.AvailabilityDrain, "stop the node's tasks and run them elsewhere"),
		cli.availabilityCommand("pause", legion.AvailabilityPause, "keep the node's tasks but place no new ones there"),
		cli.availabilityCommand("activate", legion.AvailabilityActive, "let the node take tasks again"),
		cli.suffrageCommand(true), cli.suffrageCommand(false), cli.nodeLabelCommand(), cli.nodeUpdateCommand())
	root.AddCommand(cli.scaleCommand(), cli.rollbackCommand(), node, cli.tasksCommand(), cli.rolloutCommand())
}

// updateService reads a service, changes it and applies it back at the
// version read, so a concurrent change makes it fail rather than be lost.
func (c *clusterCLI) updateService(cmd *cobra.Command, ns, name string, change func(*legion.Service) error) (client.Result, error) {
	return c.updateObject(cmd, legion.KindService, ns, name, func(o legion.Object) error { return change(o.(*legion.Service)) })
}

// updateObject reads an object, changes it and applies it back at the
// version read, reading again when a controller wrote it in between.
func (c *clusterCLI) updateObject(cmd *cobra.Command, kind legion.Kind, ns, name string, change func(legion.Object) error) (client.Result, error) {
	cl, err := c.connect(cmd)
	if err != nil {
		return client.Result{}, err
	}
	defer cl.Close()
	for attempt := 1; ; attempt++ {
		s, err := cl.Get(ctxOf(cmd), kind, ns, name)
		if err != nil {
			return client.Result{}, err
		}
		if err := change(s); err != nil {
			return client.Result{}, err
		}
		v := s.GetMetadata().Version
		res, err := cl.ApplyOne(ctxOf(cmd), s, client.ApplyOptions{ExpectedVersion: &v})
		// The controllers write the service's status all the time: read
		// it again and retry when one did between the read and the write.
		if errors.Is(err, client.ErrAborted) && attempt < 5 {
			continue
		}
		return res, err
	}
}

func (c *clusterCLI) scaleCommand() *cobra.Command {
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "scale SERVICE REPLICAS",
		Short: "Set a replicated or stateful service's replica count",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("scale: %w", err)
			}
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 || n > legion.MaxReplicas {
				return fmt.Errorf("scale: replicas %q: expected a whole number from 0 to %d", args[1], legion.MaxReplicas)
			}
			res, err := c.updateService(cmd, ns, args[0], func(s *legion.Service) error {
				if s.Spec.Mode == legion.ModeGlobal {
					return fmt.Errorf("scale: service %s is global: it runs one task per eligible node", args[0])
				}
				if a := s.Spec.Autoscale; a != nil && (n < a.Min || n > a.Max) {
					return fmt.Errorf("scale: service %s autoscales between %d and %d; %d is outside, change spec.autoscale instead", args[0], a.Min, a.Max, n)
				}
				s.Spec.Replicas = &n
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "service %s scaled to %d (%s)\n", legion.DisplayName(res.Object), n, strings.ToLower(res.Outcome))
			return c.waitRollout(cmd, wf, ns, args[0], true)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	wf.add(cmd)
	return cmd
}

func (c *clusterCLI) rollbackCommand() *cobra.Command {
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "rollback SERVICE",
		Short: "Put back the spec a service had before its last update",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
			res, err := c.updateService(cmd, ns, args[0], func(s *legion.Service) error {
				u := s.Status.Update
				if u == nil || u.PreviousSpec == nil {
					return fmt.Errorf("rollback: service %s has no earlier spec to go back to", args[0])
				}
				s.Spec = *u.PreviousSpec
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "service %s rolling back to its previous spec (%s)\n", legion.DisplayName(res.Object), strings.ToLower(res.Outcome))
			return c.waitRollout(cmd, wf, ns, args[0], true)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	wf.add(cmd)
	return cmd
}

func (c *clusterCLI) availabilityCommand(verb string, a legion.Availability, what string) *cobra.Command {
	var df drainFlags
	cmd := &cobra.Command{
		Use:   verb + " NODE",
		Short: "Set a node's availability to " + string(a) + ": " + what,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := df.check(); err != nil {
				return err
			}
			_, err := c.updateObject(cmd, legion.KindNode, "", args[0], func(o legion.Object) error {
				o.(*legion.Node).Spec.Availability = a
				return nil
			})
			if err != nil {
				return err
			}
			if df.output == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "node %s: %s\n", args[0], a)
			}
			if !df.wait {
				return nil
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			return waitDrain(ctxOf(cmd), cl, cmd.OutOrStdout(), args[0], df.timeout, df.output == "json")
		},
	}
	if a == legion.AvailabilityDrain {
		df.add(cmd)
	}
	return cmd
}

func (c *clusterCLI) nodeListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the nodes with their state, availability and tasks",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			nodes, _, err := cl.List(ctxOf(cmd), legion.KindNode, client.ListOptions{})
			if err != nil {
				return err
			}
			tasks, _, err := cl.List(ctxOf(cmd), legion.KindTask, client.ListOptions{AllNamespaces: true})
			if err != nil {
				return err
			}
			running := map[string]int{}
			for _, o := range tasks {
				t := o.(*legion.Task)
				if t.Spec.Node != "" && t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() {
					running[t.Spec.Node]++
				}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATE\tAVAILABILITY\tROLE\tPLATFORM\tTASKS\tDRAIN")
			for _, o := range nodes {
				n := o.(*legion.Node)
				drain := "-"
				if n.Status.Drain != nil {
					drain = string(n.Status.Drain.State)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s/%s\t%d\t%s\n", n.Metadata.Name, orDash(string(n.Status.State)), n.Spec.Availability,
					n.Spec.Role, orDash(n.Status.Platform.OS), orDash(n.Status.Platform.Arch), running[n.Metadata.Name], drain)
			}
			return w.Flush()
		},
	}
}

func (c *clusterCLI) tasksCommand() *cobra.Command {
	var ns string
	var all bool
	cmd := &cobra.Command{
		Use:   "tasks [SERVICE|JOB]",
		Short: "List tasks with their state, node, readiness and message",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			opts := client.ListOptions{Namespace: ns, AllNamespaces: all}
			objs, _, err := cl.List(ctxOf(cmd), legion.KindTask, opts)
			if err != nil {
				return err
			}
			var tasks []*legion.Task
			for _, o := range objs {
				t := o.(*legion.Task)
				if len(args) == 1 && t.Spec.Owner.Name != args[0] {
					continue
				}
				tasks = append(tasks, t)
			}
			sort.Slice(tasks, func(i, j int) bool {
				if tasks[i].Metadata.Namespace != tasks[j].Metadata.Namespace {
					return tasks[i].Metadata.Namespace < tasks[j].Metadata.Namespace
				}
				return tasks[i].Metadata.Name < tasks[j].Metadata.Name
			})
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAMESPACE\tNAME\tDESIRED\tSTATE\tNODE\tREADY\tIP\tAGE\tMESSAGE")
			for _, t := range tasks {
				age := "-"
				if !t.Status.Timestamp.IsZero() {
					age = time.Since(t.Status.Timestamp).Round(time.Second).String()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", t.Metadata.Namespace, t.Metadata.Name, t.Spec.DesiredState,
					orDash(string(t.Status.State)), orDash(t.Spec.Node), t.Status.Ready, orDash(t.Status.IP), age, t.Status.Message)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	return cmd
}
