package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// addOpsCommands adds the everyday operations on a running cluster:
// scale, rollback, node availability and task listing. They share the
// root's --server and --credentials.
func addOpsCommands(root *cobra.Command) {
	cli := newClusterCLI()
	node := &cobra.Command{Use: "node", Short: "List nodes, set their availability, labels and taints, promote and demote managers, remove nodes"}
	node.AddCommand(cli.nodeListCommand(),
		cli.availabilityCommand("drain", legion.AvailabilityDrain, "stop the node's tasks and run them elsewhere"),
		cli.availabilityCommand("pause", legion.AvailabilityPause, "keep the node's tasks but place no new ones there"),
		cli.availabilityCommand("activate", legion.AvailabilityActive, "let the node take tasks again"),
		cli.suffrageCommand(true), cli.suffrageCommand(false), cli.nodeLabelCommand(), cli.nodeTaintCommand(), cli.nodeUpdateCommand(), cli.nodeRemoveCommand())
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
	return changeObject(ctxOf(cmd), cl, kind, ns, name, change)
}

// changeObject is updateObject through a client already open (legion
// top's actions make the same calls).
func changeObject(ctx context.Context, cl *client.Client, kind legion.Kind, ns, name string, change func(legion.Object) error) (client.Result, error) {
	for attempt := 1; ; attempt++ {
		s, err := cl.Get(ctx, kind, ns, name)
		if err != nil {
			return client.Result{}, err
		}
		if err := change(s); err != nil {
			return client.Result{}, err
		}
		v := s.GetMetadata().Version
		res, err := cl.ApplyOne(ctx, s, client.ApplyOptions{ExpectedVersion: &v})
		// The controllers write the service's status all the time: read
		// it again and retry when one did between the read and the write.
		if errors.Is(err, client.ErrAborted) && attempt < 5 {
			continue
		}
		return res, err
	}
}

func (c *clusterCLI) scaleCommand() *cobra.Command {
	var ns, selector string
	var all bool
	var wf waitFlags
	replicas, current := -1, -1
	cmd := &cobra.Command{
		Use:   "scale SERVICE REPLICAS | SERVICE=REPLICAS... | SERVICE... --replicas N | services -l SELECTOR|--all --replicas N",
		Short: "Set a replicated or stateful service's replica count",
		Long: `Set a replicated or stateful service's replica count: legion scale web 3,
as docker service scale takes it, legion scale web=3 api=2, or as kubectl
does, legion scale service/web --replicas 3 (or service web). A Deployment
or StatefulSet is a Service here, and is refused by that name. Each in
turn, every count checked before any is set, and a service refused does
not keep the others from being scaled. --current-replicas N, as kubectl's,
scales only a service that wants N now (checked at the version written).
With -l SELECTOR or --all, as kubectl's, every service of the namespace
whose labels match, or every one, is scaled to --replicas (global
services, which have no count, left out).`,
		Args: cobra.MinimumNArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("scale: %w", err)
			}
			if cmd.Flags().Changed("replicas") && replicas < 0 {
				return fmt.Errorf("scale: --replicas %d: expected a whole number from 0 to %d", replicas, legion.MaxReplicas)
			}
			var scales []aScale
			var err error
			if selector != "" || all {
				scales, err = c.scaleSelected(cmd, args, ns, selector, all, replicas)
			} else if len(args) == 0 {
				err = errors.New("expected SERVICE REPLICAS, SERVICE=REPLICAS..., SERVICE... --replicas N, or services -l SELECTOR --replicas N")
			} else {
				scales, err = scaleArgs(args, replicas)
			}
			if err != nil {
				return fmt.Errorf("scale: %w", err)
			}
			// One service refused does not keep the others from being
			// scaled; every failure is said.
			var errs []error
			for _, sc := range scales {
				res, err := c.updateService(cmd, ns, sc.name, func(s *legion.Service) error {
					if now := s.WantedReplicas(); current >= 0 && now != current {
						return fmt.Errorf("scale: service %s wants %d replicas, not %d (--current-replicas): not scaled", s.Metadata.Name, now, current)
					}
					return setReplicas(s, sc.n)
				})
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if res.Outcome == client.Unchanged {
					fmt.Fprintf(cmd.OutOrStdout(), "%s unchanged: %d replicas already\n", ref(res.Object), sc.n)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s scaled to %d\n", ref(res.Object), sc.n)
				}
				if err := c.waitRollout(cmd, wf, ns, sc.name, true); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	cmd.Flags().IntVar(&replicas, "replicas", -1, "the count for every SERVICE named (kubectl's form)")
	cmd.Flags().IntVar(&current, "current-replicas", -1, "scale only a service that wants this many replicas now (kubectl's precondition)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "scale every service of the namespace whose labels match, to --replicas (kubectl's selectors)")
	cmd.Flags().BoolVar(&all, "all", false, "scale every service of the namespace to --replicas")
	wf.add(cmd)
	return cmd
}

// scaleSelected is scale -l or --all: every replicated or stateful
// service of namespace ns whose labels match (every one with all), to
// replicas. args may name the kind alone, as kubectl's do.
func (c *clusterCLI) scaleSelected(cmd *cobra.Command, args []string, ns, selector string, all bool, replicas int) ([]aScale, error) {
	switch {
	case selector != "" && all:
		return nil, errors.New("-l and --all: give one")
	case replicas < 0:
		return nil, errors.New("-l and --all scale to --replicas N: give it")
	case len(args) > 1:
		return nil, fmt.Errorf("%s: -l and --all select the services: name no service", strings.Join(args, " "))
	}
	if len(args) == 1 {
		if k, err := resolveKind(args[0]); err != nil || k != legion.KindService {
			return nil, fmt.Errorf("%s: -l and --all scale services: give the kind service, or nothing", args[0])
		}
	}
	f := scopeFlags{namespace: ns}
	if selector != "" {
		f.labels = []string{selector}
	}
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	objs, _, err := cl.List(ctxOf(cmd), legion.KindService, opts)
	if err != nil {
		return nil, err
	}
	var out []aScale
	for _, o := range f.keep(objs) {
		if s := o.(*legion.Service); s.Spec.Mode != legion.ModeGlobal {
			out = append(out, aScale{s.Metadata.Name, replicas})
		}
	}
	if len(out) == 0 {
		what := "services"
		if selector != "" {
			what += " with " + selector
		}
		return nil, fmt.Errorf("no replicated or stateful %s in namespace %s", what, ns)
	}
	return out, nil
}

// aScale is one service's count asked of scale.
type aScale struct {
	name string
	n    int
}

// scaleArgs reads scale's arguments: SERVICE REPLICAS, one or more
// SERVICE=REPLICAS (docker service scale), or, with replicas set
// (kubectl's --replicas; -1 when not given), one or more SERVICE. A
// service may be named as service/NAME. Every count is checked before
// any is used.
func scaleArgs(args []string, replicas int) ([]aScale, error) {
	count := func(name, v string) (aScale, error) {
		svc, err := serviceArg(name)
		if err != nil {
			return aScale{}, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > legion.MaxReplicas {
			return aScale{}, fmt.Errorf("replicas %q of %s: expected a whole number from 0 to %d", v, svc, legion.MaxReplicas)
		}
		return aScale{svc, n}, nil
	}
	if replicas >= 0 {
		if len(args) > 1 && serviceKindWord(args[0]) {
			// kubectl scale deployment web --replicas 3: the first word
			// is the kind of the others, not a service of that name.
			kind := args[0]
			args = slices.Clone(args[1:])
			for i, a := range args {
				args[i] = kind + "/" + a
			}
		}
		var out []aScale
		for _, a := range args {
			if strings.Contains(a, "=") {
				return nil, fmt.Errorf("%q: --replicas gives the count; name the services alone", a)
			}
			sc, err := count(a, strconv.Itoa(replicas))
			if err != nil {
				return nil, err
			}
			out = append(out, sc)
		}
		return noneTwice(out)
	}
	if len(args) == 2 && !strings.Contains(args[0], "=") && !strings.Contains(args[1], "=") {
		sc, err := count(args[0], args[1])
		if err != nil {
			return nil, err
		}
		return []aScale{sc}, nil
	}
	var out []aScale
	for _, a := range args {
		name, v, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: expected SERVICE=REPLICAS (or the two words SERVICE REPLICAS, or SERVICE --replicas N)", a)
		}
		sc, err := count(name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return noneTwice(out)
}

// serviceKindWord: w names the kind Service, as Legion or kubectl spell
// it (service, svc, deployment, statefulset, ...), rather than a service.
func serviceKindWord(w string) bool {
	if strings.ContainsAny(w, "/=") {
		return false
	}
	if k, err := resolveKind(w); err == nil {
		return k == legion.KindService
	}
	k, _, ok := legion.KubernetesKind(w)
	return ok && k == legion.KindService
}

// noneTwice refuses a service given twice.
func noneTwice(scales []aScale) ([]aScale, error) {
	seen := map[string]bool{}
	for _, sc := range scales {
		if seen[sc.name] {
			return nil, fmt.Errorf("service %s is given twice", sc.name)
		}
		seen[sc.name] = true
	}
	return scales, nil
}

// kindNameArg reads an argument naming an object as NAME or, as kubectl
// takes it, KIND/NAME (any spelling of the kind resolveKind reads): the
// kind ("" for a bare name) and the name. A kind not among want is
// refused, naming what was expected (what, e.g. "a service").
func kindNameArg(arg, what string, want ...legion.Kind) (legion.Kind, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return "", arg, nil
	}
	k, err := resolveKind(kind)
	if kk, how, ok := legion.KubernetesKind(kind); err != nil && ok && slices.Contains(want, kk) && name != "" {
		// kubectl's deployment/web: name it as it is here.
		return "", "", fmt.Errorf("%s: %s: %s/%s", arg, how, strings.ToLower(string(kk)), name)
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", arg, err)
	}
	if !slices.Contains(want, k) || name == "" || strings.Contains(name, "/") {
		forms := []string{"NAME"}
		for _, w := range want {
			forms = append(forms, strings.ToLower(string(w))+"/NAME")
		}
		not := ""
		if !slices.Contains(want, k) {
			not = ", not a " + string(k)
		}
		return "", "", fmt.Errorf("%s: expected %s (%s)%s", arg, what, strings.Join(forms, " or "), not)
	}
	return k, name, nil
}

// ownerArg reads tasks' SERVICE or JOB argument for ownedTasks: a name,
// or Kind/name with the kind as the object model spells it.
func ownerArg(arg string) (string, error) {
	k, name, err := kindNameArg(arg, "a service or a job", legion.KindService, legion.KindJob)
	if err != nil || k == "" {
		return name, err
	}
	return string(k) + "/" + name, nil
}

// oneServiceArg reads a command's one service: NAME, service/NAME or, as
// kubectl's autoscale takes it, the two words service NAME.
func oneServiceArg(args []string) (string, error) {
	if len(args) == 2 {
		if !serviceKindWord(args[0]) {
			return "", fmt.Errorf("%s %s: expected one service (NAME, service/NAME or service NAME)", args[0], args[1])
		}
		// The kind word reads as KIND/NAME does, so that kubectl's
		// deployment is refused naming what it is here, as by scale.
		return serviceArg(args[0] + "/" + args[1])
	}
	return serviceArg(args[0])
}

// serviceArg reads a command's SERVICE argument: a name, or service/NAME.
func serviceArg(arg string) (string, error) {
	_, name, err := kindNameArg(arg, "a service", legion.KindService)
	return name, err
}

// setReplicas is scale's change: refused for a global service and
// outside an autoscaler's bounds.
func setReplicas(s *legion.Service, n int) error {
	name := s.Metadata.Name
	if n < 0 || n > legion.MaxReplicas {
		return fmt.Errorf("scale: replicas %d: expected a whole number from 0 to %d", n, legion.MaxReplicas)
	}
	if s.Spec.Mode == legion.ModeGlobal {
		return fmt.Errorf("scale: service %s is global: it runs one task per eligible node", name)
	}
	if a := s.Spec.Autoscale; a != nil && (n < a.Min || n > a.Max) {
		return fmt.Errorf("scale: service %s autoscales between %d and %d; %d is outside, change spec.autoscale instead", name, a.Min, a.Max, n)
	}
	s.Spec.Replicas = &n
	return nil
}

// rollBack is rollback's change: the spec before the last update.
func rollBack(s *legion.Service) error {
	u := s.Status.Update
	if u == nil || u.PreviousSpec == nil {
		return fmt.Errorf("rollback: service %s has no earlier spec to go back to", s.Metadata.Name)
	}
	if onlyRestarted(*u.PreviousSpec, s.Spec) {
		// Applied, a previous spec without a restart would keep this one
		// (as any apply without spec.pod.restartedAt does) and change
		// nothing; one with an earlier restart would restart them again.
		return fmt.Errorf("rollback: the last update of service %s only restarted its tasks (legion rollout restart): there is nothing to go back to, and going back would only restart them again", s.Metadata.Name)
	}
	s.Spec = *u.PreviousSpec
	return nil
}

// onlyRestarted: now is prev restarted (a spec.pod.restartedAt set, or
// set later), and nothing else changed.
func onlyRestarted(prev, now legion.ServiceSpec) bool {
	p, n := prev.Pod.RestartedAt, now.Pod.RestartedAt
	if n == nil || p != nil && p.Equal(*n) {
		return false
	}
	prev.Pod.RestartedAt, now.Pod.RestartedAt = nil, nil
	a, err1 := json.Marshal(prev)
	b, err2 := json.Marshal(now)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

func (c *clusterCLI) rollbackCommand() *cobra.Command {
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "rollback SERVICE",
		Short: "Put back the spec a service had before its last update",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
			name, err := oneServiceArg(args)
			if err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
			res, err := c.updateService(cmd, ns, name, rollBack)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s rolled back to its previous spec\n", ref(res.Object))
			return c.waitRollout(cmd, wf, ns, name, true)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the service")
	wf.add(cmd)
	return cmd
}

// availabilityVerb says what setting each availability did: a drain has
// only begun when the command returns (--wait follows it).
var availabilityVerb = map[legion.Availability]string{
	legion.AvailabilityDrain: "draining", legion.AvailabilityPause: "paused", legion.AvailabilityActive: "activated",
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
			df.kubectlNotes(cmd.ErrOrStderr())
			// The tasks on the node, read before the drain stops them.
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			var before []legion.Object
			if a == legion.AvailabilityDrain && !df.wait {
				before, _, _ = cl.List(ctxOf(cmd), legion.KindTask, client.ListOptions{AllNamespaces: true})
			}
			_, err = c.updateObject(cmd, legion.KindNode, "", args[0], func(o legion.Object) error {
				o.(*legion.Node).Spec.Availability = a
				return nil
			})
			if err != nil {
				return err
			}
			if df.output == "" {
				confirm(cmd.OutOrStdout(), string(legion.KindNode), args[0], availabilityVerb[a])
			}
			if !df.wait {
				if before != nil {
					if nodes, _, err := cl.List(ctxOf(cmd), legion.KindNode, client.ListOptions{}); err == nil {
						if w := nowhereElse(args[0], nodes, before); w != "" {
							fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
						}
					}
				}
				return nil
			}
			return waitDrain(ctxOf(cmd), cl, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], df.timeout, df.output == "json")
		},
	}
	if a == legion.AvailabilityDrain {
		df.add(cmd)
	}
	return cmd
}

func (c *clusterCLI) nodeListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the nodes with their address, state, availability, manager status and tasks",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
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
			// Managers' reachability as the manager reached sees it; a
			// manager that cannot tell still lists the nodes.
			st, err := cl.Status(ctxOf(cmd))
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: manager status unknown: %v\n", err)
			}
			l := nodeListing(nodes, tasks, st.Members, time.Now())
			if err := l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm); err != nil {
				return err
			}
			if agentless := managersWithoutAgent(nodes, st.Members); len(agentless) > 0 {
				who := "Manager " + agentless[0] + " is not listed: it has"
				if len(agentless) > 1 {
					who = "Managers " + strings.Join(agentless, ", ") + " are not listed: they have"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s no node, as a manager run with no agent (legion daemon --no-agent) runs no tasks; legion status lists every manager.\n", who)
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// nodeListing is node ls: get's node table with each manager's status
// (Leader, Reachable, Unreachable) and the tasks running on each node.
func nodeListing(nodes, tasks []legion.Object, members []client.Member, now time.Time) listing {
	running := map[string]int{}
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Spec.Node != "" && t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() {
			running[t.Spec.Node]++
		}
	}
	status := map[string]string{}
	for _, m := range members {
		status[m.ID] = m.Reachability
	}
	l := objectListing(nodes, false, false, now)
	l.none = "nodes"
	var manager, count []string
	for _, o := range nodes {
		name := o.GetMetadata().Name
		manager = append(manager, status[name])
		count = append(count, strconv.Itoa(running[name]))
	}
	l.addColumn("MANAGER STATUS", manager)
	l.addColumn("TASKS", count)
	return l
}

// managersWithoutAgent names the managers that have no Node: those run
// with no agent, which docker node ls would still list.
func managersWithoutAgent(nodes []legion.Object, members []client.Member) []string {
	have := map[string]bool{}
	for _, o := range nodes {
		have[o.GetMetadata().Name] = true
	}
	var ids []string
	for _, m := range members {
		if !have[m.ID] {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func (c *clusterCLI) tasksCommand() *cobra.Command {
	var ns, output string
	var all bool
	cmd := &cobra.Command{
		Use:        "tasks [SERVICE|JOB]",
		SuggestFor: []string{"ps"}, // docker ps, docker service ps
		Short:      "List tasks with their state, node, readiness and message",
		Args:       cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
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
			owner := ""
			if len(args) == 1 {
				if owner, err = ownerArg(args[0]); err != nil {
					return fmt.Errorf("tasks: %w", err)
				}
			}
			l := objectListing(ownedTasks(objs, owner), all, false, time.Now())
			l.none, l.scope = "tasks", userScope(cl, all)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	outputFlag(cmd, &output)
	return cmd
}

// ownedTasks are the tasks of the service or job named (all when none),
// by namespace and name.
// The owner may be named kind/name (service/web, job/backup), and only
// that kind's tasks are listed.
func ownedTasks(objs []legion.Object, owner string) []legion.Object {
	kind, name, byKind := strings.Cut(owner, "/")
	if !byKind {
		name = owner
	}
	var tasks []legion.Object
	for _, o := range objs {
		own := o.(*legion.Task).Spec.Owner
		if owner == "" || own.Name == name && (!byKind || own.Kind == legion.Kind(kind)) {
			tasks = append(tasks, o)
		}
	}
	sort.SliceStable(tasks, func(i, j int) bool {
		a, b := tasks[i].GetMetadata(), tasks[j].GetMetadata()
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return tasks
}
