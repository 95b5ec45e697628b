package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/spf13/cobra"
)

// describeEvents is how many of an object's last events describe shows.
const describeEvents = 30

func (c *clusterCLI) describeCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe KIND [NAME...] | describe KIND/NAME... [-n NAMESPACE]",
		Short: "Show one object for people: metadata, spec summary, status, its tasks and its last events",
		Long: `Describe prints an object as a person reads it: its metadata, a summary
of its spec, its status, the tasks it runs (a Service or Job's tasks, the
tasks on a Node) and its last events and its tasks' (see legion events).
Kinds without a view of their own print spec and status as YAML. For
scripts, use legion get -o json. Several objects are described one after
the other; a KIND alone describes every one of the namespace, as kubectl
describe does.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			var targets []legion.Object
			listed := len(args) == 1 && !strings.Contains(args[0], "/") // read already, else named
			if listed {
				kind, err := resolveKind(args[0])
				if err != nil {
					return err
				}
				if targets, _, err = cl.List(ctxOf(cmd), kind, client.ListOptions{Namespace: namespace}); err != nil {
					return err
				}
				if len(targets) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "No %s found%s.\n", plural(strings.ToLower(string(kind))), userScope(cl, kind == legion.KindNamespace))
					return nil
				}
			} else if targets, err = named("describe", args, namespace); err != nil {
				return err
			}
			r := &describeReads{cmd: cmd, cl: cl, tasks: map[string][]legion.Object{}}
			var errs []error
			for i, t := range targets {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				o := t
				if !listed {
					m := t.GetMetadata()
					if o, err = cl.Get(ctxOf(cmd), t.GetKind(), m.Namespace, m.Name); err != nil {
						errs = append(errs, err)
						continue
					}
				}
				if err := r.describe(o); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace (default: default)")
	return cmd
}

// describeReads reads what describe shows beside objects, each listing once
// for all the objects of one command (describe services lists tasks and
// nodes once, not once a service).
type describeReads struct {
	cmd   *cobra.Command
	cl    *client.Client
	tasks map[string][]legion.Object // by namespace; "" for every one
	nodes []legion.Object
	// nodesRead: nodes was asked for; a user may not read Nodes, which
	// leaves it empty (publish problems are best effort).
	nodesRead bool
}

// tasksIn lists the tasks of namespace ns, or of every one when ns is "".
func (d *describeReads) tasksIn(ns string) ([]legion.Object, error) {
	if ts, ok := d.tasks[ns]; ok {
		return ts, nil
	}
	ts, _, err := d.cl.List(ctxOf(d.cmd), legion.KindTask, client.ListOptions{Namespace: ns, AllNamespaces: ns == ""})
	if err == nil {
		d.tasks[ns] = ts
	}
	return ts, err
}

// describe writes o with its tasks, its events and the problems of its
// published ports.
func (d *describeReads) describe(o legion.Object) error {
	ctx := ctxOf(d.cmd)
	kind, m := o.GetKind(), o.GetMetadata()
	var tasks []*legion.Task
	if kind == legion.KindService || kind == legion.KindJob || kind == legion.KindNode {
		ns := m.Namespace
		if kind == legion.KindNode {
			ns = "" // a node's tasks are of every namespace
		}
		objs, err := d.tasksIn(ns)
		if err != nil {
			return fmt.Errorf("listing %s's tasks: %w", m.Name, err)
		}
		tasks = ownTasks(o, objs)
	}
	ours := refSet{}
	ours.add(o)
	eo := client.EventsOptions{Namespace: m.Namespace, Kind: kind, Object: m.Name}
	if len(tasks) > 0 && kind != legion.KindNode {
		eo.Kind, eo.Object = "", "" // the tasks' events too, kept below
		for _, t := range tasks {
			ours.add(t)
		}
	}
	var evs []legion.Event
	err := d.cl.Events(ctx, eo, func(e legion.Event) error {
		if ours.has(e.Object) {
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var problems []nodePortError
	if s, ok := o.(*legion.Service); ok {
		if !d.nodesRead {
			d.nodes, _, _ = d.cl.List(ctx, legion.KindNode, client.ListOptions{})
			d.nodesRead = true
		}
		problems = publishProblems(s, d.nodes)
	}
	return describe(d.cmd.OutOrStdout(), o, tasks, evs, problems, time.Now())
}

// refSet is the objects whose events describe shows: by kind,
// namespace and name, each with its UID, so that the events of an
// object of the same name deleted before it are left out.
type refSet map[legion.ObjectRef]string

func (s refSet) add(o legion.Object) {
	m := o.GetMetadata()
	s[legion.ObjectRef{Kind: o.GetKind(), Namespace: m.Namespace, Name: m.Name}] = m.UID
}

// has: r is one of the objects, or has no UID to tell (from a manager
// that did not send it).
func (s refSet) has(r legion.ObjectRef) bool {
	uid, ok := s[legion.ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}]
	return ok && (r.UID == "" || uid == "" || r.UID == uid)
}

// ownTasks keeps the tasks of a Service or Job, or those on a Node, by
// slot then name.
func ownTasks(o legion.Object, objs []legion.Object) []*legion.Task {
	m := o.GetMetadata()
	var out []*legion.Task
	for _, x := range objs {
		t, ok := x.(*legion.Task)
		if !ok {
			continue
		}
		switch o.GetKind() {
		case legion.KindNode:
			if t.Spec.Node != m.Name {
				continue
			}
		default:
			if t.Spec.Owner.Kind != o.GetKind() || t.Spec.Owner.Name != m.Name || t.Metadata.Namespace != m.Namespace {
				continue
			}
		}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Spec.Slot != out[j].Spec.Slot {
			return out[i].Spec.Slot < out[j].Spec.Slot
		}
		return out[i].Metadata.Name < out[j].Metadata.Name
	})
	return out
}

// describer writes "Key:  value" lines, indented by section.
type describer struct {
	tw     *tabwriter.Writer
	indent string
}

func (d *describer) line(key string, value any) {
	v := fmt.Sprint(value)
	if v == "" {
		v = "<none>"
	}
	fmt.Fprintf(d.tw, "%s%s:\t%s\n", d.indent, key, v)
}

func (d *describer) section(name string) {
	fmt.Fprintf(d.tw, "%s%s:\n", d.indent, name)
}

// describe writes the human view of o; tasks and events as describe
// read them, and a Service's published ports that nodes do not serve
// (publishProblems).
func describe(w io.Writer, o legion.Object, tasks []*legion.Task, evs []legion.Event, unpublished []nodePortError, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	d := &describer{tw: tw}
	m := o.GetMetadata()
	d.line("Name", m.Name)
	if o.GetKind().Namespaced() {
		d.line("Namespace", m.Namespace)
	}
	d.line("Kind", o.GetKind())
	d.line("Labels", labelString(m.Labels))
	d.line("Version", m.Version)
	if m.Generation > 0 {
		d.line("Generation", m.Generation)
	}
	var err error
	switch x := o.(type) {
	case *legion.Service:
		descService(d, x, unpublished, now)
	case *legion.Job:
		descJob(d, x, now)
	case *legion.CronJob:
		descCronJob(d, x, now)
	case *legion.Node:
		descNode(d, x, now)
	case *legion.Task:
		descTask(d, x, now)
	case *legion.Volume:
		descVolume(d, x)
	default:
		err = descGeneric(d, o)
	}
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.GetKind() == legion.KindService || o.GetKind() == legion.KindJob || o.GetKind() == legion.KindNode {
		fmt.Fprintln(w, "Tasks:")
		if len(tasks) == 0 {
			fmt.Fprintln(w, "  <none>")
		} else {
			tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  NAME\tNODE\tDESIRED\tSTATE\tREADY\tRESTARTS\tAGE\tMESSAGE")
			for _, t := range tasks {
				name := t.Metadata.Name
				if o.GetKind() == legion.KindNode {
					name = t.Metadata.Namespace + "/" + name
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", name, orDash(t.Spec.Node), t.Spec.DesiredState,
					stateOf(t), taskReady(t), t.Status.Restarts, orDash(age(t.Status.Timestamp, now)), cell(t.Message()))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(w, "Events:")
	if len(evs) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	if len(evs) > describeEvents {
		evs = evs[len(evs)-describeEvents:]
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", lastSeen(e, now), e.Type, e.Reason, eventObject(e.Object), cell(e.Message))
	}
	return tw.Flush()
}

func stateOf(t *legion.Task) legion.TaskState {
	if t.Status.State == "" {
		return legion.TaskPending
	}
	return t.Status.State
}

func descPod(d *describer, p legion.PodSpec) {
	d.section("Containers")
	in := d.indent
	d.indent += "  "
	for _, c := range p.AllContainers() {
		d.line(c.Name, descContainer(*c))
	}
	d.indent = in
	if rp := p.RestartPolicy; rp != nil {
		attempts := fmt.Sprintf("at most %d attempts", rp.MaxAttempts)
		if rp.MaxAttempts == 0 {
			attempts = "no limit on attempts"
		}
		if rp.Condition == legion.RestartNone {
			d.line("Restart", "none") // its delay and attempts mean nothing
		} else {
			d.line("Restart", fmt.Sprintf("%s, delay %s, %s", rp.Condition, rp.Delay.D(), attempts))
		}
	}
	if r := p.RestartedAt; r != nil {
		d.line("Restarted", r.UTC().Format(time.RFC3339)+" (legion rollout restart)")
	}
}

func descContainer(c legion.Container) string {
	s := c.Image
	r := c.Resources
	if r.Requests.CPU > 0 || r.Requests.Memory > 0 {
		s += fmt.Sprintf(", requests cpu %s memory %s", r.Requests.CPU, r.Requests.Memory)
	}
	if r.Limits.CPU > 0 || r.Limits.Memory > 0 {
		s += fmt.Sprintf(", limits cpu %s memory %s", r.Limits.CPU, r.Limits.Memory)
	}
	return s
}

func descService(d *describer, s *legion.Service, unpublished []nodePortError, now time.Time) {
	d.section("Spec")
	d.indent = "  "
	d.line("Mode", s.Spec.Mode)
	if s.Spec.Replicas != nil {
		d.line("Replicas", *s.Spec.Replicas)
	}
	descPod(d, s.Spec.Pod)
	if len(s.Spec.Placement.Constraints) > 0 {
		d.line("Constraints", strings.Join(s.Spec.Placement.Constraints, ", "))
	}
	u := s.Spec.Update
	par := "1"
	if u.Parallelism != nil {
		par = strconv.Itoa(*u.Parallelism)
	}
	d.line("Update", fmt.Sprintf("parallelism %s, order %s, on failure %s", par, orDash(string(u.Order)), orDash(string(u.FailureAction))))
	if a := s.Spec.Autoscale; a != nil {
		d.line("Autoscale", autoscaleSpec(a))
	}
	if ports := compose.Summarize(s).Ports; ports != "" {
		d.line("Ports", ports)
	}
	d.indent = ""
	d.section("Status")
	d.indent = "  "
	st := s.Status
	replicas := fmt.Sprintf("%d wanted, %d running, %d ready", st.Replicas, st.Running, st.Ready)
	if st.Complete > 0 {
		replicas += fmt.Sprintf(", %d complete (its restart policy leaves them so)", st.Complete)
	}
	d.line("Replicas", replicas)
	if st.VIP != "" {
		d.line("VIP", st.VIP)
	}
	if a := st.Autoscale; a != nil && s.Spec.Autoscale != nil {
		d.line("Autoscale", autoscaleStatus(a, now))
	}
	if up := st.Update; up != nil {
		v := string(up.State)
		if up.Started != nil {
			v += ", started " + age(*up.Started, now) + " ago"
		}
		if up.Completed != nil {
			v += ", ended " + age(*up.Completed, now) + " ago"
		}
		d.line("Update", v)
		if up.Message != "" {
			d.line("Update message", up.Message)
		} else if up.Failure != "" {
			d.line("Update failed", up.Failure) // why a finished rollback went back
		}
	}
	if st.Message != "" {
		d.line("Message", st.Message)
	}
	for _, p := range unpublished {
		d.line("Not published", fmt.Sprintf("port %d on node %s: %s", p.Port, p.node, p.Error))
	}
	d.indent = ""
}

// nodePortError is a port a node reports it cannot serve.
type nodePortError struct {
	node string
	legion.PortError
}

// publishProblems lists which of a Service's published ports a node
// reports it cannot serve (another process of its host holds the port,
// on the process platform), by port then node.
func publishProblems(s *legion.Service, nodes []legion.Object) []nodePortError {
	var out []nodePortError
	for _, p := range s.Spec.Endpoint.Ports {
		if p.Publish == "" || p.PublishedPort == 0 {
			continue
		}
		for _, o := range nodes {
			n := o.(*legion.Node)
			for _, pe := range n.Status.PublishErrors {
				if pe.Port == p.PublishedPort {
					out = append(out, nodePortError{n.Metadata.Name, pe})
				}
			}
		}
	}
	return out
}

// autoscaleSpec says what an autoscaled service asks: its bounds, its
// targets and how long it waits to shrink.
func autoscaleSpec(a *legion.Autoscale) string {
	var targets []string
	if a.CPU > 0 {
		targets = append(targets, fmt.Sprintf("cpu %d%%", a.CPU))
	}
	if a.Memory > 0 {
		targets = append(targets, fmt.Sprintf("memory %d%%", a.Memory))
	}
	down := legion.DefaultDownDelay
	if a.DownDelay != nil {
		down = *a.DownDelay
	}
	return fmt.Sprintf("%d to %d replicas, %s of requests, shrinks after %s", a.Min, a.Max, strings.Join(targets, " and "), down)
}

// autoscaleStatus says the autoscaler's count, what it recommended over
// the down delay (newest first), and why it waits, if it does.
func autoscaleStatus(a *legion.AutoscaleStatus, now time.Time) string {
	s := replicasWord(a.Replicas)
	var recs []string
	for _, r := range slices.Backward(a.Recommendations) {
		recs = append(recs, fmt.Sprintf("%d (%s ago)", r.Replicas, age(r.Time, now)))
	}
	if len(recs) > 0 {
		s += "; recommended " + strings.Join(recs, ", ")
	}
	if a.Message != "" {
		s += "; " + a.Message
	}
	return s
}

func descJob(d *describer, j *legion.Job, now time.Time) {
	d.section("Spec")
	d.indent = "  "
	descJobSpec(d, j.Spec)
	d.indent = ""
	d.section("Status")
	d.indent = "  "
	st := j.Status
	d.line("State", st.State)
	d.line("Tasks", fmt.Sprintf("%d active, %d succeeded, %d failed", st.Active, st.Succeeded, st.Failed))
	if st.Started != nil {
		d.line("Started", age(*st.Started, now)+" ago")
	}
	if st.Finished != nil {
		d.line("Finished", age(*st.Finished, now)+" ago")
	}
	if st.Message != "" {
		d.line("Message", st.Message)
	}
	d.indent = ""
}

// descJobSpec is a Job's spec, a CronJob's Job's too.
func descJobSpec(d *describer, s legion.JobSpec) {
	d.line("Mode", s.Mode)
	if s.Completions > 0 {
		d.line("Completions", s.Completions)
	}
	if s.Parallelism > 0 {
		d.line("Parallelism", s.Parallelism)
	}
	if s.BackoffLimit != nil {
		d.line("Backoff limit", *s.BackoffLimit)
	}
	if s.ActiveDeadline != nil {
		d.line("Active deadline", s.ActiveDeadline.String())
	}
	descPod(d, s.Pod)
}

// descCronJob is a CronJob's schedule and policies, the Job it makes,
// and its runs: the last one due, the Jobs still running, and why the
// last run was skipped.
func descCronJob(d *describer, c *legion.CronJob, now time.Time) {
	d.section("Spec")
	d.indent = "  "
	d.line("Schedule", c.Spec.Schedule+" (UTC)")
	d.line("Suspend", c.Spec.Suspend)
	d.line("Concurrency", c.Spec.ConcurrencyPolicy)
	if sd := c.Spec.StartingDeadline; sd != nil {
		d.line("Starting deadline", sd.String())
	}
	if ok, bad := c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit; ok != nil && bad != nil {
		d.line("History", fmt.Sprintf("the last %d complete and %d failed Jobs kept", *ok, *bad))
	}
	d.section("Job")
	d.indent = "    "
	descJobSpec(d, c.Spec.Job)
	d.indent = ""
	d.section("Status")
	d.indent = "  "
	st := c.Status
	last := "none yet"
	if st.LastSchedule != nil {
		last = st.LastSchedule.UTC().Format(time.RFC3339) + " (" + age(*st.LastSchedule, now) + " ago)"
	}
	d.line("Last schedule", last)
	d.line("Active", strings.Join(st.Active, ", "))
	if st.Message != "" {
		d.line("Message", st.Message)
	}
	d.indent = ""
}

func descNode(d *describer, n *legion.Node, now time.Time) {
	d.line("Role", n.Spec.Role)
	d.line("Availability", n.Spec.Availability)
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.String())
	}
	d.line("Taints", strings.Join(taints, ", "))
	d.section("Status")
	d.indent = "  "
	st := n.Status
	d.line("State", st.State)
	d.line("Address", st.Addr)
	d.line("Hostname", st.Hostname)
	if st.Platform.OS != "" {
		d.line("Platform", st.Platform.OS+"/"+st.Platform.Arch)
	}
	d.line("Version", st.Version)
	if in := st.Ingress; in != nil {
		var at []string
		if in.HTTP != "" {
			at = append(at, "HTTP at "+in.HTTP)
		}
		if in.HTTPS != "" {
			at = append(at, "HTTPS at "+in.HTTPS)
		}
		d.line("Ingress", "serves Routes over "+strings.Join(at, " and "))
	}
	r := st.Resources
	d.line("Capacity", fmt.Sprintf("cpu %s, memory %s", r.Capacity.CPU, r.Capacity.Memory))
	d.line("Allocatable", fmt.Sprintf("cpu %s, memory %s", r.Allocatable.CPU, r.Allocatable.Memory))
	if dr := st.Drain; dr != nil {
		d.line("Drain", dr.State)
		for _, it := range dr.Remaining {
			d.line("  Holding it up", string(it.Kind)+" "+it.Name+": "+it.Reason)
		}
	}
	if st.Message != "" {
		d.line("Message", st.Message)
	}
	for _, pe := range st.PublishErrors {
		d.line("Not published", fmt.Sprintf("port %d: %s", pe.Port, pe.Error))
	}
	if st.MemoryPressure {
		d.line("Memory pressure", "yes: its agent evicts tasks requesting no memory, then those above their request, and none requesting no memory is placed here")
	}
	d.indent = ""
}

func descTask(d *describer, t *legion.Task, now time.Time) {
	d.line("Owner", strings.ToLower(string(t.Spec.Owner.Kind))+"/"+t.Spec.Owner.Name)
	d.line("Slot", t.Spec.Slot)
	d.line("Node", t.Spec.Node)
	d.line("Desired state", t.Spec.DesiredState)
	if t.Spec.DesiredState != legion.TaskRunning && t.Spec.StopReason != "" {
		d.line("Told to stop", t.Spec.StopReason)
	}
	descPod(d, t.Spec.Pod)
	d.section("Status")
	d.indent = "  "
	st := t.Status
	d.line("State", stateOf(t))
	d.line("Ready", st.Ready)
	d.line("Restarts", st.Restarts)
	if !st.Timestamp.IsZero() {
		d.line("Since", age(st.Timestamp, now)+" ago")
	}
	if st.IP != "" {
		d.line("IP", st.IP)
	}
	if st.ExitCode != nil {
		d.line("Exit code", *st.ExitCode)
	}
	if st.Message != "" {
		d.line("Message", st.Message)
	}
	if len(st.Containers) > 0 {
		d.section("Containers")
		d.indent = "    "
		for _, c := range st.Containers {
			d.line(c.Name, containerLine(c))
		}
	}
	d.indent = ""
}

// containerLine is one container of a task's status, as kubectl
// describe pod shows its state, readiness, restarts and last state.
func containerLine(c legion.ContainerStatus) string {
	s := c.State
	if c.State == "exited" && c.ExitCode != nil {
		s += fmt.Sprintf(" (%d)", *c.ExitCode)
	}
	if c.Ready {
		s += ", ready"
	}
	if c.Restarts > 0 {
		s += fmt.Sprintf(", %d restarts", c.Restarts)
	}
	if c.Message != "" {
		s += "; last run " + c.Message
	}
	return s
}

func descVolume(d *describer, v *legion.Volume) {
	d.line("Driver", v.Spec.Driver)
	if v.Spec.Size > 0 {
		d.line("Size", v.Spec.Size)
	}
	d.section("Status")
	d.indent = "  "
	d.line("State", v.State())
	d.line("Node", v.Status.Node)
	d.line("Backend", v.Status.Backend)
	if mg := v.Status.Migration; mg != nil {
		d.line("Migration", fmt.Sprintf("%s from %s to %s (attempt %d)", mg.State, mg.From, mg.To, mg.Attempt))
	}
	if len(v.Status.Snapshots) > 0 {
		d.line("Snapshots", strings.Join(v.Status.Snapshots, ", "))
	}
	if v.Status.Message != "" {
		d.line("Message", v.Status.Message)
	}
	d.indent = ""
}

// describeGeneric prints spec and status as YAML for kinds without a
// view of their own; a Secret's value never shows.
func descGeneric(d *describer, o legion.Object) error {
	if s, ok := o.(*legion.Secret); ok {
		c := *s
		c.Spec = legion.SecretSpec{}
		d.line("Data", fmt.Sprintf("%d bytes (not shown)", len(s.Spec.Data)))
		o = &c
	}
	for _, part := range []struct {
		name string
		v    any
	}{{"Spec", o.SpecPtr()}, {"Status", o.StatusPtr()}} {
		if part.v == nil {
			continue
		}
		data, err := json.Marshal(part.v)
		if err != nil {
			return err
		}
		if string(data) == "{}" || string(data) == "null" {
			continue
		}
		y, err := legion.JSONToYAML(data)
		if err != nil {
			return err
		}
		d.section(part.name)
		for _, l := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			fmt.Fprintf(d.tw, "  %s\n", l)
		}
	}
	return nil
}
