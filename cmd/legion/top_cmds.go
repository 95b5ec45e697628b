package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/topui"
	"github.com/spf13/cobra"
)

// addTopCommands adds legion top and its nodes, tasks and services views.
func addTopCommands(root *cobra.Command) {
	cli := newClusterCLI()
	top := cli.topCommand()
	tasks := cli.topListCommand("tasks", "Show each running task's CPU and memory against its requests and limits", tasksTopListing, false)
	tasks.Aliases = []string{"task", "pods", "pod"} // kubectl top pods: a pod is a task's here
	svcs := cli.topListCommand("services", "Show each service's CPU and memory summed over its tasks, against their requests and limits", servicesTopListing, false)
	svcs.Aliases = []string{"service", "svc"}
	nodes := cli.topListCommand("nodes", "Show each node's CPU and memory in use against what it can allocate and holds", nodesTopListing, true)
	nodes.Aliases = []string{"node", "no"} // kubectl top node
	top.AddCommand(nodes, tasks, svcs)
	root.AddCommand(top)
}

// usageData is what the top views are computed from.
type usageData struct {
	nodes    []*legion.Node
	tasks    []*legion.Task
	services []*legion.Service
	usage    []legion.Usage
}

// readUsage lists what the top views need: nodes only when asked (a
// user may read tasks without nodes).
func readUsage(ctx context.Context, cl *client.Client, opts client.ListOptions, withNodes bool) (usageData, error) {
	var d usageData
	if withNodes {
		objs, _, err := cl.List(ctx, legion.KindNode, client.ListOptions{})
		if err != nil {
			return d, err
		}
		d.nodes = typed[*legion.Node](objs)
	}
	objs, _, err := cl.List(ctx, legion.KindTask, opts)
	if err != nil {
		return d, err
	}
	d.tasks = typed[*legion.Task](objs)
	objs, _, err = cl.List(ctx, legion.KindService, opts)
	if err != nil {
		return d, err
	}
	d.services = typed[*legion.Service](objs)
	ns := opts.Namespace
	if opts.AllNamespaces {
		ns = ""
	}
	d.usage, err = cl.Usage(ctx, ns)
	return d, err
}

func typed[T legion.Object](objs []legion.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// topListCommand is one of top's listings. Nodes are of no namespace: they
// read every namespace's usage and take no namespace flags.
func (c *clusterCLI) topListCommand(use, short string, view func(usageData, string) listing, nodes bool) *cobra.Command {
	var ns, output, sortBy string
	var all, noHeaders bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			fm.noHeaders = noHeaders
			switch sortBy {
			case "", "cpu", "memory":
			default:
				return fmt.Errorf("--sort-by %q: expected cpu or memory", sortBy)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			d, err := readUsage(ctxOf(cmd), cl, client.ListOptions{Namespace: ns, AllNamespaces: all || nodes}, nodes)
			if err != nil {
				return err
			}
			l := view(d, sortBy)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	cmd.Flags().StringVar(&sortBy, "sort-by", "", "list the most used first: cpu or memory, as kubectl top does (those with no report last)")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "print the table without its header line")
	if !nodes {
		cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace")
		cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
		// kubectl top pod --containers: nodes report a task's use as its
		// pod's jail counts it, one figure for all its containers.
		f := cmd.Flags().VarPF(&kubectlFlag{bool: true, why: "a task's use is measured for its pod as a whole (rctl counts the pod's jail), not per container: legion top tasks shows it"},
			"containers", "", "kubectl's")
		f.NoOptDefVal, f.Hidden = "true", true
	}
	outputFlag(cmd, &output)
	return cmd
}

// dashUnless is "-" for an amount that is not set (no limit, no report).
func dashUnless(set bool, s string) string {
	if !set {
		return "-"
	}
	return s
}

// byUse orders a top view's rows by sortBy (cpu or memory, the most
// first; rows with no report last), keeping the order of equal ones.
func byUse[T any](rows []T, sortBy string, use func(T) (reported bool, cpu legion.CPU, mem legion.Bytes)) {
	if sortBy == "" {
		return
	}
	slices.SortStableFunc(rows, func(a, b T) int {
		ra, ca, ma := use(a)
		rb, cb, mb := use(b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if sortBy == "cpu" {
			return cmp.Compare(cb, ca)
		}
		return cmp.Compare(mb, ma)
	})
}

func nodesTopListing(d usageData, sortBy string) listing {
	l := listing{none: "nodes", columns: []column{{name: "NAME"}, {name: "STATE"}, {name: "TASKS"},
		{name: "CPU"}, {name: "CPU%"}, {name: "CPU ALLOCATABLE"}, {name: "CPU CAPACITY", wide: true},
		{name: "MEMORY"}, {name: "MEMORY%"}, {name: "MEMORY ALLOCATABLE"}, {name: "MEMORY CAPACITY", wide: true},
		{name: "AVAILABILITY", wide: true}}}
	rows := topui.Nodes(d.nodes, d.tasks, d.usage)
	byUse(rows, sortBy, func(n topui.NodeUsage) (bool, legion.CPU, legion.Bytes) { return n.Reported, n.CPU, n.Memory })
	for _, n := range rows {
		l.add("node/"+n.Name, n, n.Name, string(n.State), strconv.Itoa(n.Tasks),
			dashUnless(n.Reported, topui.FormatCPU(n.CPU)), dashUnless(n.Reported, topui.Percent(int64(n.CPU), int64(n.CPUAllocatable))),
			topui.FormatCPU(n.CPUAllocatable), topui.FormatCPU(n.CPUCapacity),
			dashUnless(n.Reported, topui.FormatBytes(n.Memory)), dashUnless(n.Reported, topui.Percent(int64(n.Memory), int64(n.MemoryAllocatable))),
			topui.FormatBytes(n.MemoryAllocatable), topui.FormatBytes(n.MemoryCapacity), string(n.Availability))
	}
	return l
}

// share is used against the limit, or against the request when there is
// no limit.
func share(used, request, limit int64) string {
	if limit > 0 {
		return topui.Percent(used, limit)
	}
	return topui.Percent(used, request)
}

func tasksTopListing(d usageData, sortBy string) listing {
	l := listing{none: "tasks", columns: []column{{name: "NAMESPACE"}, {name: "NAME"}, {name: "NODE"},
		{name: "CPU"}, {name: "CPU REQUEST"}, {name: "CPU LIMIT"}, {name: "CPU%"},
		{name: "MEMORY"}, {name: "MEMORY REQUEST"}, {name: "MEMORY LIMIT"}, {name: "MEMORY%"},
		{name: "OWNER", wide: true}, {name: "STATE", wide: true}}}
	rows := topui.Tasks(d.tasks, d.usage)
	byUse(rows, sortBy, func(t topui.TaskUsage) (bool, legion.CPU, legion.Bytes) { return t.Reported, t.CPU, t.Memory })
	for _, t := range rows {
		l.add("task/"+t.Name, t, t.Namespace, t.Name, t.Node,
			dashUnless(t.Reported, topui.FormatCPU(t.CPU)), topui.FormatCPU(t.CPURequest), dashUnless(t.CPULimit > 0, topui.FormatCPU(t.CPULimit)),
			dashUnless(t.Reported, share(int64(t.CPU), int64(t.CPURequest), int64(t.CPULimit))),
			dashUnless(t.Reported, topui.FormatBytes(t.Memory)), topui.FormatBytes(t.MemoryRequest), dashUnless(t.MemoryLimit > 0, topui.FormatBytes(t.MemoryLimit)),
			dashUnless(t.Reported, share(int64(t.Memory), int64(t.MemoryRequest), int64(t.MemoryLimit))),
			t.Owner, string(t.State))
	}
	return l
}

func servicesTopListing(d usageData, sortBy string) listing {
	l := listing{none: "services", columns: []column{{name: "NAMESPACE"}, {name: "NAME"}, {name: "TASKS"},
		{name: "CPU"}, {name: "CPU REQUEST"}, {name: "CPU LIMIT"}, {name: "CPU%"},
		{name: "MEMORY"}, {name: "MEMORY REQUEST"}, {name: "MEMORY LIMIT"}, {name: "MEMORY%"}}}
	rows := topui.Services(d.services, d.tasks, d.usage)
	byUse(rows, sortBy, func(s topui.ServiceUsage) (bool, legion.CPU, legion.Bytes) { return s.Reported, s.CPU, s.Memory })
	for _, s := range rows {
		l.add("service/"+s.Name, s, s.Namespace, s.Name, strconv.Itoa(s.Tasks),
			dashUnless(s.Reported, topui.FormatCPU(s.CPU)), topui.FormatCPU(s.CPURequest), dashUnless(s.CPULimit > 0, topui.FormatCPU(s.CPULimit)),
			dashUnless(s.Reported, share(int64(s.CPU), int64(s.CPURequest), int64(s.CPULimit))),
			dashUnless(s.Reported, topui.FormatBytes(s.Memory)), topui.FormatBytes(s.MemoryRequest), dashUnless(s.MemoryLimit > 0, topui.FormatBytes(s.MemoryLimit)),
			dashUnless(s.Reported, share(int64(s.Memory), int64(s.MemoryRequest), int64(s.MemoryLimit))))
	}
	return l
}
