package scheduler

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// Plan computes the writes that converge the snapshot at time now. It is
// pure and deterministic: it changes nothing it is given and the same
// input always gives the same result.
//
// A pass makes at most MaxCreatesPerPass tasks, shared fairly between the
// owners that want new ones (see creates.go).
func Plan(state State, now time.Time) Result {
	r, demand := plan(&state, now, nil)
	if sum(demand) <= MaxCreatesPerPass {
		return r
	}
	r, _ = plan(&state, now, fairShares(demand, MaxCreatesPerPass))
	return r
}

// plan is one run of the planner; caps, when not nil, is how many tasks
// each owner may make (none for an owner it leaves out). It returns how
// many tasks each owner wanted to make, up to MaxCreatesPerPass each.
func plan(state *State, now time.Time, caps map[ownerKey]int) (Result, map[ownerKey]int) {
	p := newPlanner(state, now)
	p.caps = caps
	p.nodeHealth()
	p.indexTasks()
	p.volumesBefore()
	p.cronJobs()
	for _, o := range p.ownerList {
		switch {
		case o.svc != nil:
			p.service(o)
		case o.job != nil:
			p.jobOwner(o)
		default:
			p.ownerGone(o)
		}
	}
	p.volumesAfter()
	p.drainStatus()
	p.namespaceUsage()
	return p.finish(), p.demand
}

// planner holds one pass's indexes and the writes made so far.
type planner struct {
	st     *State
	now    time.Time
	nowPtr *time.Time // shared by every task placed this pass
	res    Result

	// allPins: every node runs images pinned by digest, so pods' tags are
	// resolved by the leader before their tasks are made (6.1 Identity).
	allPins bool
	// enforcing: an ImagePolicy enforces, so every pod's images are checked
	// before its tasks start (see imagesReady).
	enforcing bool

	nodes   []*nodeInfo // by name
	room    []nodeRoom  // by node index
	nodeIdx map[string]int

	owners    map[ownerKey]*owner
	ownerList []*owner // services by namespace/name, then jobs, then tasks' missing owners
	entries   []*entry
	ns        map[string]*nsInfo
	volumes   map[nsName]*legion.Volume // as this pass leaves them
	vols      map[nsName]*volState
	volOut    map[nsName]*legion.Volume // the Volumes this pass changed
	// servicesByNS lists the services of each namespace, for affinity terms.
	servicesByNS map[string][]*owner

	// caps and demand: the tasks each owner may make this run, and wanted
	// to (see creates.go).
	caps    map[ownerKey]int
	demand  map[ownerKey]int
	created int

	svcOut map[*legion.Service]*legion.Service
	jobOut map[*legion.Job]*legion.Job

	slotBuf    []slot
	groupOrder []int
	taskBuf    []legion.Task
	entryBuf   []entry
	views      []slotView
	filters    map[string]*filterResult
	spreads    map[string][]groupLevel
	tierCache  map[string][2][]nodeGroup
	usageIdx   map[nsName]legion.Usage
	// liveByNS counts each namespace's tasks not ended, for owners under
	// a quota of tasks (overTaskQuota); nil until one asks.
	liveByNS    map[string]int
	deletedJobs map[*legion.Job]bool
}

type nsName struct{ ns, name string }

type ownerKey struct {
	kind     legion.Kind
	ns, name string
}

// entry is one task as this pass sees it: t is the task as it will be
// stored (orig unless the pass changed it).
type entry struct {
	orig, t *legion.Task
	num     int
	owner   *owner
	slot    *slot
	node    int // index of t.Spec.Node in nodes, -1 when none or unknown
	// st, ready, run (desired running) and cur (runs the owner's pod as it
	// is now) mirror t: the passes over every task read them from here
	// rather than from the scattered tasks.
	st      legion.TaskState
	ready   bool
	run     bool
	cur     bool
	created bool
	deleted bool
	// drainReason says why a task on a draining node has not left yet.
	drainReason string
}

// slot is one of an owner's slots: its tasks by task number.
type slot struct {
	key     int    // replicated: 1..n; stateful: ordinal; job: completion slot
	node    string // global: the node
	entries []*entry
	maxNum  int
	inline  [1]*entry
}

type nsInfo struct {
	quota    *legion.Quota
	security legion.NamespaceSecurity
	used     legion.ResourceRequests
	tasks    int
}

func newPlanner(st *State, now time.Time) *planner {
	p := &planner{
		st: st, now: now, nowPtr: &now,
		nodeIdx:      make(map[string]int, len(st.Nodes)),
		owners:       make(map[ownerKey]*owner, len(st.Services)+len(st.Jobs)),
		ns:           make(map[string]*nsInfo, len(st.Namespaces)),
		volumes:      make(map[nsName]*legion.Volume, len(st.Volumes)),
		servicesByNS: map[string][]*owner{},
		svcOut:       map[*legion.Service]*legion.Service{},
		filters:      map[string]*filterResult{},
		spreads:      map[string][]groupLevel{},
		tierCache:    map[string][2][]nodeGroup{},
		jobOut:       map[*legion.Job]*legion.Job{},
	}
	nodes := slices.Clone(st.Nodes)
	slices.SortFunc(nodes, func(a, b *legion.Node) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	p.allPins = len(nodes) > 0
	for _, n := range nodes {
		p.allPins = p.allPins && n.Status.ImagePins
	}
	for i, n := range nodes {
		p.nodes = append(p.nodes, newNodeInfo(n))
		p.room = append(p.room, newNodeRoom(n))
		p.nodeIdx[n.Metadata.Name] = i
	}
	for _, ip := range st.ImagePolicies {
		p.enforcing = p.enforcing || ip.Spec.Mode != legion.PolicyWarn
	}
	for _, n := range st.Namespaces {
		p.ns[n.Metadata.Name] = &nsInfo{quota: n.Spec.Quota, security: n.Spec.Security}
	}
	for _, v := range st.Volumes {
		p.volumes[nsName{v.Metadata.Namespace, v.Metadata.Name}] = v
	}
	svcs := slices.Clone(st.Services)
	slices.SortFunc(svcs, func(a, b *legion.Service) int { return compareMeta(&a.Metadata, &b.Metadata) })
	for _, s := range svcs {
		o := newServiceOwner(s)
		p.owners[o.key] = o
		p.ownerList = append(p.ownerList, o)
		p.servicesByNS[o.key.ns] = append(p.servicesByNS[o.key.ns], o)
	}
	jobs := slices.Clone(st.Jobs)
	slices.SortFunc(jobs, func(a, b *legion.Job) int { return compareMeta(&a.Metadata, &b.Metadata) })
	for _, j := range jobs {
		o := newJobOwner(j)
		p.owners[o.key] = o
		p.ownerList = append(p.ownerList, o)
	}
	return p
}

func compareMeta(a, b *legion.Metadata) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func (p *planner) nsOf(name string) *nsInfo {
	n := p.ns[name]
	if n == nil {
		n = &nsInfo{}
		p.ns[name] = n
	}
	return n
}

// indexTasks files every task under its owner and slot, orphans the tasks
// of lost nodes and books what placed tasks take. Tasks whose owner is
// gone get an owner record of their own, so they are stopped and deleted.
func (p *planner) indexTasks() {
	tasks := p.st.Tasks
	backing := make([]entry, len(tasks))
	p.entries = make([]*entry, 0, len(tasks))
	var orphans []*owner
	var last *owner
	for i, t := range tasks {
		k := ownerKey{t.Spec.Owner.Kind, t.Metadata.Namespace, t.Spec.Owner.Name}
		o := last
		// The store lists tasks by name, so an owner's tasks mostly come
		// together: skip the map for them.
		if o == nil || o.key != k {
			o = p.owners[k]
			if o == nil {
				o = &owner{key: k}
				p.owners[k] = o
				orphans = append(orphans, o)
			}
			last = o
		}
		e := &backing[i]
		*e = entry{orig: t, t: t, num: taskNumber(t.Metadata.Name), owner: o, node: -1, st: stateOf(t), ready: t.Status.Ready,
			run: t.Spec.DesiredState == legion.TaskRunning, cur: o.hash != "" && t.Spec.PodHash == o.hash}
		if t.Spec.Node != "" {
			if n, ok := p.nodeIdx[t.Spec.Node]; ok {
				e.node = n
			}
		}
		p.entries = append(p.entries, e)
		p.addEntry(o, e)
		// While the task is in cache: lost nodes, then what it takes.
		p.orphanLost(e)
		p.account(e)
	}
	slices.SortFunc(orphans, func(a, b *owner) int {
		if c := strings.Compare(a.key.ns, b.key.ns); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.key.kind), string(b.key.kind)); c != 0 {
			return c
		}
		return strings.Compare(a.key.name, b.key.name)
	})
	p.ownerList = append(p.ownerList, orphans...)
	for _, o := range p.ownerList {
		o.sortSlots()
	}
}

// newSlot hands out slots from chunks, as a pass makes thousands.
func (p *planner) newSlot() *slot {
	if len(p.slotBuf) == 0 {
		p.slotBuf = make([]slot, min(max(len(p.st.Tasks)/2, 16), 1024))
	}
	s := &p.slotBuf[0]
	p.slotBuf = p.slotBuf[1:]
	s.entries = s.inline[:0:1] // most slots hold one task: no allocation for it
	return s
}

// taskNumber reads n from a task named <owner>-<slot>-<n>.
func taskNumber(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return 0
	}
	return n
}

// mut returns the task of e for changing, copying it on first change.
func (p *planner) mut(e *entry) *legion.Task {
	if e.t == e.orig && !e.created {
		c := *e.orig
		e.t = &c
	}
	return e.t
}

func stateOf(t *legion.Task) legion.TaskState {
	if t.Status.State == "" {
		return legion.TaskPending
	}
	return t.Status.State
}

func live(t *legion.Task) bool { return !stateOf(t).Terminal() }

// live reports whether the entry's task is not terminal.
func (e *entry) live() bool { return !e.st.Terminal() }

// isReady: running and ready.
func (e *entry) isReady() bool { return e.st == legion.TaskRunning && e.ready }

// placed reports whether the task holds resources on its node.
func placed(t *legion.Task) bool { return t.Spec.Node != "" && t.Spec.Placed != nil && live(t) }

// placed reports whether the entry's task holds resources on its node.
func (e *entry) placed() bool { return e.node >= 0 && e.t.Spec.Placed != nil && e.live() }

// stop tells a task to stop, saying why in its spec (the agent's status
// will say only that it stopped). A task never sent to a node is stopped
// at once, as no agent will report on it.
func (p *planner) stop(e *entry, msg string) {
	t := e.t
	if !e.live() || t.Spec.DesiredState == legion.TaskShutdown {
		return
	}
	t = p.mut(e)
	t.Spec.DesiredState = legion.TaskShutdown
	t.Spec.StopReason = msg
	e.run = false
	if t.Spec.Placed == nil {
		t.Status.State = legion.TaskShutdown
		e.st = legion.TaskShutdown
		t.Status.Timestamp = p.now
		t.Status.Message = msg
	} else if msg != "" && t.Status.Message != msg && e.st == legion.TaskPending {
		t.Status.Message = msg
	}
}

// remove deletes a terminal task.
func (p *planner) remove(e *entry) {
	if !e.deleted && !e.created {
		e.deleted = true
	}
}

func (p *planner) wake(t time.Time) {
	if !t.After(p.now) {
		t = p.now.Add(time.Millisecond)
	}
	if p.res.NextWake.IsZero() || t.Before(p.res.NextWake) {
		p.res.NextWake = t
	}
}

// finish collects the writes, sorted.
func (p *planner) finish() Result {
	for _, e := range p.entries {
		switch {
		case e.created:
			p.res.CreateTasks = append(p.res.CreateTasks, e.t)
		case e.deleted:
			p.res.DeleteTasks = append(p.res.DeleteTasks, e.orig)
		case e.t != e.orig:
			p.res.UpdateTasks = append(p.res.UpdateTasks, e.t)
		}
	}
	for _, n := range p.nodes {
		if n.out != nil {
			p.res.UpdateNodes = append(p.res.UpdateNodes, n.out)
		}
	}
	for _, s := range p.svcOut {
		p.res.UpdateServices = append(p.res.UpdateServices, s)
	}
	for _, j := range p.jobOut {
		p.res.UpdateJobs = append(p.res.UpdateJobs, j)
	}
	byTask := func(a, b *legion.Task) int { return compareMeta(&a.Metadata, &b.Metadata) }
	slices.SortFunc(p.res.CreateTasks, byTask)
	slices.SortFunc(p.res.UpdateTasks, byTask)
	slices.SortFunc(p.res.DeleteTasks, byTask)
	slices.SortFunc(p.res.UpdateServices, func(a, b *legion.Service) int { return compareMeta(&a.Metadata, &b.Metadata) })
	byJob := func(a, b *legion.Job) int { return compareMeta(&a.Metadata, &b.Metadata) }
	slices.SortFunc(p.res.CreateJobs, byJob)
	slices.SortFunc(p.res.UpdateJobs, byJob)
	slices.SortFunc(p.res.DeleteJobs, byJob)
	slices.SortFunc(p.res.UpdateCronJobs, func(a, b *legion.CronJob) int { return compareMeta(&a.Metadata, &b.Metadata) })
	p.volumeWrites()
	byVol := func(a, b *legion.Volume) int { return compareMeta(&a.Metadata, &b.Metadata) }
	slices.SortFunc(p.res.CreateVolumes, byVol)
	slices.SortFunc(p.res.UpdateVolumes, byVol)
	return p.res
}
