// Package schedtest is a harness for the planner in the style of Nomad's
// scheduler harness: build a cluster in a few lines, run scheduler.Plan
// against it step by step while simulated agents start, ready, fail and
// stop tasks and nodes go silent, on a fake clock, and look at the state
// after each step.
//
// It is for tests only; it keeps everything in memory and imports nothing
// beyond the standard library, legion and scheduler.
package schedtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
)

// TB is the part of testing.TB (and rapid.T) the harness uses.
type TB interface {
	Fatalf(format string, args ...any)
}

// Start is the fake clock's starting time.
var Start = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// Cluster is an in-memory store, a fake clock and simulated agents.
type Cluster struct {
	t   TB
	Now time.Time
	// LeaderSince is when the simulated leader took over (an hour before
	// Start unless a test says otherwise).
	LeaderSince time.Time

	Services   map[string]*legion.Service // by namespace/name
	Jobs       map[string]*legion.Job
	CronJobs   map[string]*legion.CronJob
	Tasks      map[string]*legion.Task
	Nodes      map[string]*legion.Node // by name
	Volumes    map[string]*legion.Volume
	Namespaces map[string]*legion.Namespace
	Policies   map[string]*legion.ImagePolicy // by name
	Heartbeats map[string]time.Time
	Usage      []legion.Usage

	// Silent nodes send no heartbeats and their agents do nothing.
	Silent map[string]bool
	// Agent behaviour.
	Ready      bool                       // tasks become ready when they run (default true)
	FailImages map[string]string          // image -> failure message when a task starts
	FailNodes  map[string]string          // node -> failure message when a task starts there (an image it lacks)
	Permanent  map[string]bool            // image -> its failure is permanent (unstartable)
	NoPlatform map[string]legion.Platform // image -> rejected on nodes of this platform
	JobRunTime time.Duration              // a job's task completes after running this long
	FailJobs   map[string]bool            // job name -> its tasks fail instead of completing
	version    uint64

	// Last is the last plan's result.
	Last scheduler.Result
	// Steps counts plan passes.
	Steps int
}

// New returns an empty cluster at Start.
func New(t TB) *Cluster {
	return &Cluster{
		t: t, Now: Start, LeaderSince: Start.Add(-time.Hour),
		Services: map[string]*legion.Service{}, Jobs: map[string]*legion.Job{}, CronJobs: map[string]*legion.CronJob{},
		Tasks: map[string]*legion.Task{}, Nodes: map[string]*legion.Node{}, Volumes: map[string]*legion.Volume{},
		Namespaces: map[string]*legion.Namespace{}, Policies: map[string]*legion.ImagePolicy{}, Heartbeats: map[string]time.Time{},
		Silent: map[string]bool{}, Ready: true, FailImages: map[string]string{}, FailNodes: map[string]string{}, Permanent: map[string]bool{},
		NoPlatform: map[string]legion.Platform{}, JobRunTime: 5 * time.Second, FailJobs: map[string]bool{},
	}
}

func (c *Cluster) helper() {
	if h, ok := c.t.(interface{ Helper() }); ok {
		h.Helper()
	}
}

func key(m *legion.Metadata) string { return m.Namespace + "/" + m.Name }

func (c *Cluster) nextVersion() uint64 { c.version++; return c.version }

// NodeOption changes a node as AddNode makes it.
type NodeOption func(*legion.Node)

// Labels sets node labels.
func Labels(kv ...string) NodeOption {
	return func(n *legion.Node) {
		if n.Metadata.Labels == nil {
			n.Metadata.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}

// Resources sets allocatable CPU and memory ("4", "8Gi").
func Resources(cpu, mem string) NodeOption {
	return func(n *legion.Node) {
		c, err := legion.ParseCPU(cpu)
		if err != nil {
			panic(err)
		}
		m, err := legion.ParseBytes(mem)
		if err != nil {
			panic(err)
		}
		n.Status.Resources.Allocatable = legion.ResourceRequests{CPU: c, Memory: m}
		n.Status.Resources.Capacity = n.Status.Resources.Allocatable
	}
}

// Arch sets the node's architecture.
func Arch(arch string) NodeOption {
	return func(n *legion.Node) { n.Status.Platform.Arch = arch }
}

// Taint adds a taint.
func Taint(k, v string, effect legion.TaintEffect) NodeOption {
	return func(n *legion.Node) {
		n.Spec.Taints = append(n.Spec.Taints, legion.Taint{Key: k, Value: v, Effect: effect})
	}
}

// AddNode adds a ready, active freebsd/amd64 worker with 4 CPUs and 8Gi
// allocatable that has just sent a heartbeat.
func (c *Cluster) AddNode(name string, opts ...NodeOption) *legion.Node {
	c.helper()
	n := &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode,
		Metadata: legion.Metadata{Name: name}}}
	if err := legion.Admit(n); err != nil {
		c.t.Fatalf("admitting node %s: %v", name, err)
	}
	n.Status = legion.NodeStatus{State: legion.NodeReady, Hostname: name,
		Platform: legion.Platform{OS: "freebsd", Arch: "amd64"}}
	Resources("4", "8Gi")(n)
	for _, o := range opts {
		o(n)
	}
	n.Metadata.Version = c.nextVersion()
	c.Nodes[name] = n
	c.Heartbeats[name] = c.Now
	return n
}

// AddNodes adds count nodes named prefix1..prefixN.
func (c *Cluster) AddNodes(prefix string, count int, opts ...NodeOption) {
	c.helper()
	for i := 1; i <= count; i++ {
		c.AddNode(fmt.Sprintf("%s%d", prefix, i), opts...)
	}
}

// WithNodes returns a new cluster with count ready nodes, n1 to
// n<count>, each with opts (see AddNodes).
func WithNodes(t TB, count int, opts ...NodeOption) *Cluster {
	c := New(t)
	c.AddNodes("n", count, opts...)
	return c
}

// SetAvailability drains, pauses or activates a node.
func (c *Cluster) SetAvailability(name string, a legion.Availability) {
	c.helper()
	n := c.node(name)
	cp := *n
	cp.Spec.Availability = a
	cp.Metadata.Version = c.nextVersion()
	c.Nodes[name] = &cp
}

// RemoveNode deletes a node, as `legion node rm` does.
func (c *Cluster) RemoveNode(name string) {
	c.helper()
	c.node(name)
	delete(c.Nodes, name)
	delete(c.Heartbeats, name)
}

// Volume returns a stored Volume of the default namespace.
func (c *Cluster) Volume(name string) *legion.Volume {
	c.helper()
	v := c.Volumes["default/"+name]
	if v == nil {
		c.t.Fatalf("no volume %s", name)
	}
	return v
}

// SetVolume changes a stored Volume of the default namespace (as the
// dispatcher's claims and the migrator do), bumping its version.
func (c *Cluster) SetVolume(name string, fn func(*legion.Volume)) {
	c.helper()
	cp := *c.Volume(name)
	if m := cp.Status.Migration; m != nil {
		mc := *m
		cp.Status.Migration = &mc
	}
	fn(&cp)
	cp.Metadata.Version = c.nextVersion()
	c.Volumes["default/"+name] = &cp
}

// SetTaints replaces a node's taints.
func (c *Cluster) SetTaints(name string, taints ...legion.Taint) {
	c.helper()
	n := c.node(name)
	cp := *n
	cp.Spec.Taints = taints
	cp.Metadata.Version = c.nextVersion()
	c.Nodes[name] = &cp
}

// UpdateNode changes a copy of a node as its agent's report or an
// operator would, bumping its version.
func (c *Cluster) UpdateNode(name string, fn func(*legion.Node)) {
	c.helper()
	cp := *c.node(name)
	fn(&cp)
	cp.Metadata.Version = c.nextVersion()
	c.Nodes[name] = &cp
}

func (c *Cluster) node(name string) *legion.Node {
	c.helper()
	n := c.Nodes[name]
	if n == nil {
		c.t.Fatalf("no node %s", name)
	}
	return n
}

// Apply admits a YAML manifest and stores its objects, bumping the
// generation of an object whose spec changed.
func (c *Cluster) Apply(manifest string) {
	c.helper()
	objs, err := legion.ParseManifest("test", []byte(manifest))
	if err != nil {
		c.t.Fatalf("manifest: %v", err)
	}
	for _, o := range objs {
		c.Store(o)
	}
}

// ApplyAndConverge applies manifest and plans until the cluster settles.
func (c *Cluster) ApplyAndConverge(manifest string) {
	c.helper()
	c.Apply(manifest)
	c.Converge()
}

// Store writes an admitted object as the API server would: generation
// bumps on spec changes, status is kept from the stored object.
func (c *Cluster) Store(o legion.Object) {
	c.helper()
	m := o.GetMetadata()
	if o.GetKind().Namespaced() && m.Namespace == "" {
		m.Namespace = legion.DefaultNamespace
	}
	m.Version = c.nextVersion()
	switch o := o.(type) {
	case *legion.Service:
		old := c.Services[key(m)]
		o.Metadata.Generation = 1
		if old != nil {
			o.Status = old.Status
			o.Metadata.Generation = old.Metadata.Generation
			if !sameJSON(old.Spec, o.Spec) {
				o.Metadata.Generation++
			}
		}
		c.Services[key(m)] = o
	case *legion.Job:
		if old := c.Jobs[key(m)]; old != nil {
			o.Status = old.Status
		}
		o.Metadata.Generation = max(o.Metadata.Generation, 1)
		c.Jobs[key(m)] = o
	case *legion.CronJob:
		if old := c.CronJobs[key(m)]; old != nil {
			o.Status = old.Status
		}
		c.CronJobs[key(m)] = o
	case *legion.Namespace:
		c.Namespaces[m.Name] = o
	case *legion.Volume:
		if old := c.Volumes[key(m)]; old != nil {
			o.Status = old.Status
		}
		c.Volumes[key(m)] = o
	case *legion.Node:
		c.Nodes[m.Name] = o
	case *legion.ImagePolicy:
		c.Policies[m.Name] = o
	default:
		c.t.Fatalf("the harness does not store %s", o.GetKind())
	}
}

// DeleteService removes a service.
func (c *Cluster) DeleteService(name string) { delete(c.Services, "default/"+name) }

// DeleteCronJob removes a cron job.
func (c *Cluster) DeleteCronJob(name string) { delete(c.CronJobs, "default/"+name) }

// State is the snapshot the planner sees now.
func (c *Cluster) State() scheduler.State {
	st := scheduler.State{
		Heartbeats: maps.Clone(c.Heartbeats), LeaderSince: c.LeaderSince, Usage: slices.Clone(c.Usage),
	}
	for _, k := range slices.Sorted(maps.Keys(c.Services)) {
		st.Services = append(st.Services, c.Services[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Jobs)) {
		st.Jobs = append(st.Jobs, c.Jobs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.CronJobs)) {
		st.CronJobs = append(st.CronJobs, c.CronJobs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tasks)) {
		st.Tasks = append(st.Tasks, c.Tasks[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Nodes)) {
		st.Nodes = append(st.Nodes, c.Nodes[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Volumes)) {
		st.Volumes = append(st.Volumes, c.Volumes[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Namespaces)) {
		st.Namespaces = append(st.Namespaces, c.Namespaces[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Policies)) {
		st.ImagePolicies = append(st.ImagePolicies, c.Policies[k])
	}
	return st
}

// Plan runs the planner once and applies its writes, without agents.
func (c *Cluster) Plan() scheduler.Result {
	c.helper()
	r := scheduler.Plan(c.State(), c.Now)
	c.Last = r
	c.Steps++
	c.apply(r)
	return r
}

// Write applies a plan's writes to the store, as the controller loop
// would, checking each update's version precondition.
func (c *Cluster) Write(r scheduler.Result) {
	c.helper()
	c.Last = r
	c.Steps++
	c.apply(r)
}

func (c *Cluster) apply(r scheduler.Result) {
	c.helper()
	for _, t := range r.CreateTasks {
		if _, dup := c.Tasks[key(&t.Metadata)]; dup {
			c.t.Fatalf("plan creates task %s, which exists", key(&t.Metadata))
		}
		t.Metadata.Version = c.nextVersion()
		c.Tasks[key(&t.Metadata)] = t
	}
	for _, t := range r.UpdateTasks {
		old := c.Tasks[key(&t.Metadata)]
		if old == nil {
			c.t.Fatalf("plan updates task %s, which does not exist", key(&t.Metadata))
		}
		if old.Metadata.Version != t.Metadata.Version {
			c.t.Fatalf("plan updates task %s at version %d, stored %d", key(&t.Metadata), t.Metadata.Version, old.Metadata.Version)
		}
		t.Metadata.Version = c.nextVersion()
		c.Tasks[key(&t.Metadata)] = t
	}
	for _, t := range r.DeleteTasks {
		delete(c.Tasks, key(&t.Metadata))
	}
	for _, s := range r.UpdateServices {
		old := c.Services[key(&s.Metadata)]
		if old == nil {
			continue // deleted meanwhile
		}
		if !sameJSON(old.Spec, s.Spec) {
			s.Metadata.Generation++
		}
		s.Metadata.Version = c.nextVersion()
		c.Services[key(&s.Metadata)] = s
	}
	for _, j := range r.CreateJobs {
		j.Metadata.Generation, j.Metadata.Version = 1, c.nextVersion()
		c.Jobs[key(&j.Metadata)] = j
	}
	for _, j := range r.UpdateJobs {
		if c.Jobs[key(&j.Metadata)] != nil {
			j.Metadata.Version = c.nextVersion()
			c.Jobs[key(&j.Metadata)] = j
		}
	}
	for _, j := range r.DeleteJobs {
		delete(c.Jobs, key(&j.Metadata))
	}
	for _, cj := range r.UpdateCronJobs {
		cj.Metadata.Version = c.nextVersion()
		c.CronJobs[key(&cj.Metadata)] = cj
	}
	for _, n := range r.UpdateNodes {
		n.Metadata.Version = c.nextVersion()
		c.Nodes[n.Metadata.Name] = n
	}
	for _, v := range r.CreateVolumes {
		v.Metadata.Version = c.nextVersion()
		c.Volumes[key(&v.Metadata)] = v
	}
	for _, v := range r.UpdateVolumes {
		old := c.Volumes[key(&v.Metadata)]
		if old == nil {
			c.t.Fatalf("plan updates volume %s, which does not exist", key(&v.Metadata))
		}
		if old.Metadata.Version != v.Metadata.Version {
			c.t.Fatalf("plan updates volume %s at version %d, stored %d", key(&v.Metadata), v.Metadata.Version, old.Metadata.Version)
		}
		v.Metadata.Version = c.nextVersion()
		c.Volumes[key(&v.Metadata)] = v
	}
	for _, n := range r.UpdateNamespaces {
		if c.Namespaces[n.Metadata.Name] != nil {
			n.Metadata.Version = c.nextVersion()
			c.Namespaces[n.Metadata.Name] = n
		}
	}
}

// Agents lets every node that is not silent act on its tasks once: stop
// what should stop, start what was assigned (failing it as configured),
// complete job tasks that ran JobRunTime. It reports whether anything
// changed.
func (c *Cluster) Agents() bool {
	changed := false
	for _, k := range slices.Sorted(maps.Keys(c.Tasks)) {
		t := c.Tasks[k]
		if t.Spec.Node == "" || t.Spec.Placed == nil || c.Silent[t.Spec.Node] || t.Status.State.Terminal() {
			continue
		}
		if _, ok := c.Nodes[t.Spec.Node]; !ok {
			continue
		}
		nt := *t
		now := c.Now
		switch {
		case t.Spec.DesiredState == legion.TaskShutdown:
			nt.Status.State, nt.Status.Ready, nt.Status.Finished = legion.TaskShutdown, false, &now
			nt.Status.Timestamp = now
		case t.Status.State == legion.TaskAssigned || t.Status.State == legion.TaskAccepted:
			if msg, bad := c.failure(t); bad {
				nt.Status.State, nt.Status.Message, nt.Status.Timestamp, nt.Status.Finished = legion.TaskFailed, msg, now, &now
				nt.Status.Permanent = c.permanent(t)
				if pl, ok := c.wrongPlatform(t); ok {
					nt.Status.State = legion.TaskRejected
					nt.Status.WrongPlatform = &pl
				}
				break
			}
			nt.Status.State, nt.Status.Started, nt.Status.Timestamp = legion.TaskRunning, &now, now
			nt.Status.Ready = c.Ready
		case t.Status.State == legion.TaskRunning && t.Spec.Job:
			if t.Status.Started != nil && !c.Now.Before(t.Status.Started.Add(c.JobRunTime)) {
				if c.FailJobs[t.Spec.Owner.Name] {
					nt.Status.State, nt.Status.Message = legion.TaskFailed, "exit status 1"
				} else {
					nt.Status.State = legion.TaskComplete
				}
				nt.Status.Timestamp, nt.Status.Finished, nt.Status.Ready = now, &now, false
			} else {
				continue
			}
		default:
			continue
		}
		nt.Metadata.Version = c.nextVersion()
		c.Tasks[k] = &nt
		changed = true
	}
	return changed
}

func (c *Cluster) failure(t *legion.Task) (string, bool) {
	if _, ok := c.wrongPlatform(t); ok {
		return "no image for the platform", true
	}
	for _, ct := range t.Spec.Pod.Containers {
		if msg, ok := c.FailImages[ct.Image]; ok {
			return msg, true
		}
	}
	if msg, ok := c.FailNodes[t.Spec.Node]; ok {
		return msg, true
	}
	return "", false
}

func (c *Cluster) permanent(t *legion.Task) bool {
	for _, ct := range t.Spec.Pod.Containers {
		if c.Permanent[ct.Image] {
			return true
		}
	}
	return false
}

func (c *Cluster) wrongPlatform(t *legion.Task) (legion.Platform, bool) {
	n := c.Nodes[t.Spec.Node]
	for _, ct := range t.Spec.Pod.Containers {
		if pl, ok := c.NoPlatform[ct.Image]; ok && n != nil && n.Status.Platform.Arch == pl.Arch {
			return n.Status.Platform, true
		}
	}
	return legion.Platform{}, false
}

// Heartbeat records a heartbeat now from every node that is not silent.
func (c *Cluster) Heartbeat() {
	for name := range c.Nodes {
		if !c.Silent[name] {
			c.Heartbeats[name] = c.Now
		}
	}
}

// Step is one round: heartbeats, a plan pass, then the agents. It reports
// whether anything changed.
func (c *Cluster) Step() bool {
	c.helper()
	c.Heartbeat()
	r := c.Plan()
	a := c.Agents()
	return !r.Empty() || a
}

// Converge steps without moving the clock until nothing changes.
func (c *Cluster) Converge() {
	c.helper()
	for i := 0; i < 200; i++ {
		if !c.Step() {
			return
		}
	}
	c.t.Fatalf("no convergence after 200 steps at %s: last plan %s", c.Now.Format(time.RFC3339), Describe(c.Last))
}

// Run moves the clock forward by d in one-second ticks, converging at each.
func (c *Cluster) Run(d time.Duration) {
	c.helper()
	end := c.Now.Add(d)
	c.Converge()
	for c.Now.Before(end) {
		c.Now = c.Now.Add(time.Second)
		c.Converge()
	}
}

// Advance moves the clock without running anything.
func (c *Cluster) Advance(d time.Duration) { c.Now = c.Now.Add(d) }

// Service returns a stored service of the default namespace.
func (c *Cluster) Service(name string) *legion.Service {
	c.helper()
	s := c.Services["default/"+name]
	if s == nil {
		c.t.Fatalf("no service %s", name)
	}
	return s
}

// Node returns a stored node.
func (c *Cluster) Node(name string) *legion.Node { return c.node(name) }

// Job returns a stored job of the default namespace, or nil.
func (c *Cluster) Job(name string) *legion.Job { return c.Jobs["default/"+name] }

// OwnerTasks returns the tasks of an owner (in any namespace), by name.
func (c *Cluster) OwnerTasks(owner string) []*legion.Task {
	var out []*legion.Task
	for _, t := range c.Tasks {
		if t.Spec.Owner.Name == owner {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *legion.Task) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	return out
}

// Live returns the owner's tasks that are not terminal and meant to run.
func (c *Cluster) Live(owner string) []*legion.Task {
	var out []*legion.Task
	for _, t := range c.OwnerTasks(owner) {
		if !t.Status.State.Terminal() && t.Spec.DesiredState == legion.TaskRunning {
			out = append(out, t)
		}
	}
	return out
}

// Running counts the owner's running tasks meant to run.
func (c *Cluster) Running(owner string) int {
	n := 0
	for _, t := range c.Live(owner) {
		if t.Status.State == legion.TaskRunning {
			n++
		}
	}
	return n
}

// NodesOf maps node name to the count of the owner's live tasks there.
func (c *Cluster) NodesOf(owner string) map[string]int {
	m := map[string]int{}
	for _, t := range c.Live(owner) {
		if t.Spec.Node != "" && t.Spec.Placed != nil {
			m[t.Spec.Node]++
		}
	}
	return m
}

// Task returns a stored task of the default namespace.
func (c *Cluster) Task(name string) *legion.Task { return c.Tasks["default/"+name] }

// SetTask changes a stored task as an agent would.
func (c *Cluster) SetTask(name string, fn func(*legion.Task)) {
	c.helper()
	t := c.Tasks["default/"+name]
	if t == nil {
		c.t.Fatalf("no task %s", name)
	}
	cp := *t
	fn(&cp)
	cp.Metadata.Version = c.nextVersion()
	c.Tasks["default/"+name] = &cp
}

// Fail makes a running task fail now.
func (c *Cluster) Fail(name, msg string) {
	now := c.Now
	c.SetTask(name, func(t *legion.Task) {
		t.Status.State, t.Status.Message, t.Status.Ready = legion.TaskFailed, msg, false
		t.Status.Timestamp, t.Status.Finished = now, &now
	})
}

// Describe renders a plan result briefly, for failure messages.
func Describe(r scheduler.Result) string {
	var b strings.Builder
	names := func(verb string, ts []*legion.Task) {
		for _, t := range ts {
			fmt.Fprintf(&b, "%s %s (%s %s on %q); ", verb, t.Metadata.Name, t.Status.State, t.Spec.DesiredState, t.Spec.Node)
		}
	}
	names("create", r.CreateTasks)
	names("update", r.UpdateTasks)
	names("delete", r.DeleteTasks)
	for _, s := range r.UpdateServices {
		fmt.Fprintf(&b, "service %s; ", s.Metadata.Name)
	}
	for _, n := range r.UpdateNodes {
		fmt.Fprintf(&b, "node %s %s; ", n.Metadata.Name, n.Status.State)
	}
	for _, j := range r.UpdateJobs {
		fmt.Fprintf(&b, "job %s %s; ", j.Metadata.Name, j.Status.State)
	}
	for _, j := range r.CreateJobs {
		fmt.Fprintf(&b, "create job %s; ", j.Metadata.Name)
	}
	for _, j := range r.DeleteJobs {
		fmt.Fprintf(&b, "delete job %s; ", j.Metadata.Name)
	}
	for _, j := range r.UpdateCronJobs {
		fmt.Fprintf(&b, "cronjob %s; ", j.Metadata.Name)
	}
	return b.String()
}

// SortedNames returns the names of tasks, sorted.
func SortedNames(ts []*legion.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Metadata.Name
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
