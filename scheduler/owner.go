package scheduler

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/legionbsd/legion"
)

// owner is a Service or Job (or a missing owner's leftovers) with its tasks
// filed by slot, and what placement needs of it, worked out on first use.
type owner struct {
	key       ownerKey
	svc       *legion.Service
	job       *legion.Job
	pod       *legion.PodSpec
	placement *legion.Placement
	global    bool
	stateful  bool
	hash      string
	gen       uint64
	wanted    int               // slots wanted this pass (services)
	labels    map[string]string // shared by the tasks it makes this pass

	// slots are the replicated, stateful and job slots by key: small keys
	// in vec (no hashing per task), any others in the map.
	vec    []*slot
	slots  map[int]*slot
	byNode map[string]*slot // global services and jobs
	all    []*entry

	req     legion.ResourceRequests // the current pod's, see requestsOf
	haveReq bool

	imageGate int8 // 0: not yet known; 1: may start tasks; 2: held for image digests

	// created counts the tasks made this run (mayCreate).
	created int

	// Placement data, built by prepare.
	prepared   bool
	requests   legion.ResourceRequests
	hostPorts  []hostPort // see hostPortsOf
	portsKnown bool
	ns         *nsInfo
	static     []staticResult // per node index
	candidates []int          // node indexes passing the static filters
	tiers      [2][]nodeGroup // the candidates grouped for pick
	nodeCount  []int32        // live tasks of this owner per node index
	spread     []spreadLevel
	antiReq    []*owner // owners whose tasks it must avoid
	antiPref   []*owner
	affPref    []*owner
	wrong      []legion.Platform
	// failMsg caches why a task of this owner could not be placed this
	// pass: placements only take room, so the next one fails too.
	failMsg string
	// message collects what the owner's status should say.
	messages []string
	// snap is what the tasks an update or rollback starts do to their
	// Volumes first (see updateSnapshot).
	snap *legion.TaskSnapshot
}

type hostPort struct {
	proto legion.Protocol
	port  int
}

func newServiceOwner(s *legion.Service) *owner {
	o := &owner{
		key: ownerKey{legion.KindService, s.Metadata.Namespace, s.Metadata.Name},
		svc: s, pod: &s.Spec.Pod, placement: &s.Spec.Placement,
		global: s.Spec.Mode == legion.ModeGlobal, stateful: s.Spec.Mode == legion.ModeStateful,
		gen: s.Metadata.Generation,
	}
	o.hash = PodHash(&s.Spec.Pod)
	o.init()
	return o
}

func newJobOwner(j *legion.Job) *owner {
	o := &owner{
		key: ownerKey{legion.KindJob, j.Metadata.Namespace, j.Metadata.Name},
		job: j, pod: &j.Spec.Pod, placement: &j.Spec.Placement,
		global: j.Spec.Mode == legion.JobGlobal, gen: j.Metadata.Generation,
	}
	o.hash = PodHash(&j.Spec.Pod)
	o.init()
	return o
}

func (o *owner) init() {
	o.byNode = map[string]*slot{}
}

// requestsOf is what a task of the owner requests: worked out once for
// tasks of the current pod, from the task's own pod for others.
func (o *owner) requestsOf(t *legion.Task) legion.ResourceRequests {
	if o.pod != nil && t.Spec.PodHash == o.hash {
		if !o.haveReq {
			o.req, o.haveReq = o.pod.Requests(), true
		}
		return o.req
	}
	return t.Spec.Pod.Requests()
}

// PodHash identifies a pod spec, to tell current tasks from outdated ones:
// tasks carry it in spec.podHash, and the image resolver keys a service's
// resolved digests (status.images.podHash) by it, so both must use this.
func PodHash(p *legion.PodSpec) string {
	b, err := json.Marshal(p)
	if err != nil {
		// A PodSpec always marshals; fall back to something stable.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (p *planner) addEntry(o *owner, e *entry) {
	if o.byNode == nil {
		o.init()
	}
	o.all = append(o.all, e)
	var s *slot
	if o.global || (o.svc == nil && o.job == nil && e.t.Spec.Slot == 0 && e.t.Spec.Node != "") {
		s = o.byNode[e.t.Spec.Node]
		if s == nil {
			s = p.newSlot()
			s.node = e.t.Spec.Node
			o.byNode[e.t.Spec.Node] = s
		}
	} else {
		s = o.getSlot(e.t.Spec.Slot)
		if s == nil {
			s = p.newSlot()
			s.key = e.t.Spec.Slot
			o.putSlot(s)
		}
	}
	s.entries = append(s.entries, e)
	s.maxNum = max(s.maxNum, e.num)
	e.slot = s
}

func (o *owner) sortSlots() {
	o.eachSlot(func(s *slot) {
		if len(s.entries) > 1 {
			slices.SortFunc(s.entries, byNum)
		}
	})
}

// eachSlot calls fn with every slot of the owner, in no set order:
// numbered (vec and slots) and per node (byNode).
func (o *owner) eachSlot(fn func(*slot)) {
	for _, s := range o.vec {
		if s != nil {
			fn(s)
		}
	}
	for _, s := range o.slots {
		fn(s)
	}
	for _, s := range o.byNode {
		fn(s)
	}
}

func byNum(a, b *entry) int {
	if c := cmp.Compare(a.num, b.num); c != 0 {
		return c
	}
	return cmp.Compare(a.t.Metadata.Name, b.t.Metadata.Name)
}

// vecLimit bounds the slot keys kept in vec.
const vecLimit = legion.MaxReplicas + 1

func (o *owner) getSlot(key int) *slot {
	if key >= 0 && key < vecLimit {
		if key < len(o.vec) {
			return o.vec[key]
		}
		return nil
	}
	return o.slots[key]
}

func (o *owner) putSlot(s *slot) {
	if s.key >= 0 && s.key < vecLimit {
		if s.key >= len(o.vec) {
			o.vec = append(o.vec, make([]*slot, s.key+1-len(o.vec))...)
		}
		o.vec[s.key] = s
		return
	}
	if o.slots == nil {
		o.slots = map[int]*slot{}
	}
	o.slots[s.key] = s
}

// slot returns the slot of a key, making it if needed.
func (p *planner) slotOf(o *owner, key int) *slot {
	s := o.getSlot(key)
	if s == nil {
		s = p.newSlot()
		s.key = key
		o.putSlot(s)
	}
	return s
}

// slotList returns the keyed slots in key order.
func (o *owner) slotList() []*slot {
	out := make([]*slot, 0, len(o.vec)+len(o.slots))
	for _, s := range o.slots {
		if s.key < 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *slot) int { return cmp.Compare(a.key, b.key) })
	for _, s := range o.vec {
		if s != nil {
			out = append(out, s)
		}
	}
	n := len(out)
	for _, s := range o.slots {
		if s.key >= 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out[n:], func(a, b *slot) int { return cmp.Compare(a.key, b.key) })
	return out
}

func (p *planner) nodeSlot(o *owner, node string) *slot {
	s := o.byNode[node]
	if s == nil {
		s = p.newSlot()
		s.node = node
		o.byNode[node] = s
	}
	return s
}

// sortedNodeSlots returns the global slots by node name.
func (o *owner) sortedNodeSlots() []*slot {
	out := make([]*slot, 0, len(o.byNode))
	for _, s := range o.byNode {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *slot) int { return cmp.Compare(a.node, b.node) })
	return out
}

// liveEntries returns the slot's live tasks, and of them the last one
// meant to run.
func (s *slot) lastTerminal() *entry {
	for i := len(s.entries) - 1; i >= 0; i-- {
		if e := s.entries[i]; !e.deleted && !e.live() {
			return e
		}
	}
	return nil
}

// newTask makes the slot's next task, pending and unplaced. Tasks and
// entries come from chunks and an owner's tasks share one labels map (see
// withFailures), as a pass may make tens of thousands.
func (p *planner) newTask(o *owner, s *slot) *entry {
	if p.liveByNS != nil {
		p.liveByNS[o.key.ns]++
	}
	num := s.maxNum + 1
	s.maxNum = num
	var name string
	if o.global {
		name = o.key.name + "-" + s.node + "-" + strconv.Itoa(num)
	} else {
		name = o.key.name + "-" + strconv.Itoa(s.key) + "-" + strconv.Itoa(num)
	}
	if len(p.taskBuf) == 0 {
		p.taskBuf = make([]legion.Task, 256)
		p.entryBuf = make([]entry, 256)
	}
	t := &p.taskBuf[0]
	p.taskBuf = p.taskBuf[1:]
	*t = legion.Task{
		Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Name: name, Namespace: o.key.ns}},
		Spec: legion.TaskSpec{
			Owner:           legion.Owner{Kind: o.key.kind, Name: o.key.name},
			Slot:            s.key,
			Node:            s.node,
			DesiredState:    legion.TaskRunning,
			Pod:             *o.pod,
			OwnerGeneration: o.gen,
			PodHash:         o.hash,
		},
		Status: legion.TaskStatus{State: legion.TaskPending, Timestamp: p.now},
	}
	if o.labels == nil {
		if o.job != nil {
			o.labels = map[string]string{LabelJob: o.key.name}
		} else {
			o.labels = map[string]string{LabelService: o.key.name}
		}
	}
	t.Metadata.Labels = o.labels
	if o.job != nil {
		t.Spec.Job = true
		if o.job.Status.Images != nil && o.job.Status.Images.PodHash == o.hash {
			t.Spec.Images = o.job.Status.Images.Digests
		}
	} else {
		if im := o.svc.Status.Images; im != nil && im.PodHash == o.hash {
			t.Spec.Images = im.Digests
		}
	}
	if o.stateful {
		t.Spec.Hostname = o.key.name + "-" + strconv.Itoa(s.key)
	}
	if vols := p.taskVolumes(o, s.key); vols != nil {
		t.Spec.Volumes = vols
		t.Spec.Snapshot = slotSnapshot(o, s)
	}
	if o.global {
		// A global task names its node from the start; the slot is 0.
		t.Spec.Slot = 0
	}
	e := &p.entryBuf[0]
	p.entryBuf = p.entryBuf[1:]
	*e = entry{orig: t, t: t, num: num, owner: o, slot: s, created: true, node: -1, st: legion.TaskPending, run: true, cur: true}
	if s.node != "" {
		if i, ok := p.nodeIdx[s.node]; ok {
			e.node = i
		}
	}
	s.entries = append(s.entries, e)
	o.all = append(o.all, e)
	p.entries = append(p.entries, e)
	return e
}

// withFailures labels a new task with the failures in a row before it, in
// a labels map of its own.
func withFailures(e *entry, failures int) {
	if failures == 0 {
		return
	}
	l := make(map[string]string, len(e.t.Metadata.Labels)+1)
	for k, v := range e.t.Metadata.Labels {
		l[k] = v
	}
	l[LabelFailures] = strconv.Itoa(failures)
	e.t.Metadata.Labels = l
}

// failuresInRow counts the failed tasks at the end of the slot's history,
// carried past the history kept by LabelFailures.
func failuresInRow(s *slot) int {
	n := 0
	for i := len(s.entries) - 1; i >= 0; i-- {
		t := s.entries[i].t
		if live(t) {
			continue
		}
		st := stateOf(t)
		if st != legion.TaskFailed && st != legion.TaskRejected {
			return n
		}
		if v, ok := t.Metadata.Labels[LabelFailures]; ok {
			if k, err := strconv.Atoi(v); err == nil {
				return n + k + 1
			}
		}
		n++
	}
	return n
}

// backoff is base doubled per failure in a row after the first, capped.
func backoff(base time.Duration, failures int, limit time.Duration) time.Duration {
	if base <= 0 {
		base = time.Second
	}
	d := base
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// ended is when a terminal task stopped.
func ended(t *legion.Task) time.Time {
	if t.Status.Finished != nil {
		return *t.Status.Finished
	}
	return t.Status.Timestamp
}
