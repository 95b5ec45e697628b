package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/legionbsd/legion"
)

// reason is why a node cannot take a task; the order is the order of the
// filters (3.5), so a node is counted under the first it fails.
type reason uint8

const (
	rNone reason = iota
	rDown
	rSuspect
	rNotReady
	rPaused
	rDraining
	rPlatformConstraint
	rWrongPlatform
	rNoLimits
	rMemoryPressure
	rCPU
	rMemory
	rConstraint
	rTaint
	rAntiAffinity
	rPort
	rVolume
)

// staticResult is what the filters that depend only on the node and the
// owner say of one node.
type staticResult struct {
	code     reason
	idx      int16 // the constraint or taint that failed
	preferNo bool  // an untolerated PreferNoSchedule taint
}

// filterResult is the static filters' verdict on every node for owners
// with the same placement, and the nodes that pass.
type filterResult struct {
	static     []staticResult
	candidates []int
}

// filterKey identifies what the static filters depend on, besides the
// node.
func filterKey(pl *legion.Placement, hasLimits, avoidPressure bool, wrong []legion.Platform) string {
	var b strings.Builder
	for _, c := range pl.Constraints {
		b.WriteString(c)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range pl.Tolerations {
		b.WriteString(t.Key + "=" + t.Value + ":" + string(t.Effect))
		b.WriteByte(0)
	}
	b.WriteByte(1)
	if hasLimits {
		b.WriteByte('L')
	}
	if avoidPressure {
		b.WriteByte('P')
	}
	for _, w := range wrong {
		fmt.Fprintf(&b, "%s/%s/%v;", w.OS, w.Arch, w.Linux)
	}
	return b.String()
}

// groupLevel maps each node to its group at one spread level: the values
// of that level's label within the groups of the levels before it.
type groupLevel struct {
	group []int32
	n     int
}

// spreadGroups works out the nested spread groups of a preference list,
// once per pass for each list.
func (p *planner) spreadGroups(prefs []legion.Preference) []groupLevel {
	if len(prefs) == 0 {
		return nil
	}
	var kb strings.Builder
	for _, pr := range prefs {
		kb.WriteString(pr.Spread)
		kb.WriteByte(0)
	}
	key := kb.String()
	if g, ok := p.spreads[key]; ok {
		return g
	}
	var out []groupLevel
	var prev []int32
	for _, pref := range prefs {
		label := strings.TrimPrefix(pref.Spread, "node.labels.")
		type pathKey struct {
			prev  int32
			value string
			has   bool
		}
		ids := map[pathKey]int32{}
		g := groupLevel{group: make([]int32, len(p.nodes))}
		for i, n := range p.nodes {
			v, ok := n.n.Metadata.Labels[label]
			k := pathKey{value: v, has: ok}
			if prev != nil {
				k.prev = prev[i]
			}
			id, seen := ids[k]
			if !seen {
				id = int32(len(ids))
				ids[k] = id
			}
			g.group[i] = id
		}
		g.n = len(ids)
		out = append(out, g)
		prev = g.group
	}
	p.spreads[key] = out
	return out
}

type spreadLevel struct {
	group  []int32 // node index -> group
	counts []int32 // group -> the owner's tasks in it
}

// taskOn counts the owner's tasks per node (and per spread group).
func (o *owner) taskOn(i int, delta int32) {
	if o.nodeCount == nil {
		return // sized by prepare; accounting before it is replayed there
	}
	o.nodeCount[i] += delta
	for _, l := range o.spread {
		l.counts[l.group[i]] += delta
	}
}

// avoidsPressure: the owner's tasks request no memory, so they stay off
// nodes under memory pressure, whose agents evict such tasks first, as
// Kubernetes taints such a node for them. A global service's run on
// every node whatever (a DaemonSet's tolerate the taint).
func avoidsPressure(o *owner) bool { return !o.global && o.requests.Memory == 0 }

// prepare works out what placement needs of an owner, once per pass.
func (p *planner) prepare(o *owner) {
	if o.prepared {
		return
	}
	o.prepared = true
	o.requests = o.pod.Requests()
	hostPortsOf(o)
	o.nodeCount = make([]int32, len(p.nodes))
	for _, e := range o.all {
		if e.placed() {
			o.nodeCount[e.node]++
		}
	}
	o.wrong = wrongPlatforms(o)
	// Owners placed alike share the static filters and the spread groups.
	hasLimits := o.pod.HasLimits()
	fkey := filterKey(o.placement, hasLimits, avoidsPressure(o), o.wrong)
	f := p.filters[fkey]
	if f == nil {
		f = &filterResult{static: make([]staticResult, len(p.nodes))}
		cons, _ := legion.ParseConstraints(o.placement.Constraints)
		for i, n := range p.nodes {
			r := p.staticFilter(o, n, cons, hasLimits)
			f.static[i] = r
			if r.code == rNone {
				f.candidates = append(f.candidates, i)
			}
		}
		p.filters[fkey] = f
	}
	o.static, o.candidates = f.static, f.candidates
	o.spread = nil
	for _, g := range p.spreadGroups(o.placement.Preferences) {
		sl := spreadLevel{group: g.group, counts: make([]int32, g.n)}
		for i, c := range o.nodeCount {
			sl.counts[sl.group[i]] += c
		}
		o.spread = append(o.spread, sl)
	}
	gkey := fkey + "\x02"
	for _, pr := range o.placement.Preferences {
		gkey += pr.Spread + "\x00"
	}
	if t, ok := p.tierCache[gkey]; ok {
		o.tiers = t
	} else {
		o.groupCandidates()
		p.tierCache[gkey] = o.tiers
	}
	// Affinity terms name services of the namespace, for services and jobs.
	o.antiReq, o.antiPref = nil, nil
	for _, term := range o.placement.AntiAffinity {
		for _, other := range p.servicesByNS[o.key.ns] {
			if legion.MatchLabels(term.Services, other.svc.Metadata.Labels) {
				p.prepareCounts(other)
				if term.Required {
					o.antiReq = append(o.antiReq, other)
				} else {
					o.antiPref = append(o.antiPref, other)
				}
			}
		}
	}
	for _, term := range o.placement.Affinity {
		for _, other := range p.servicesByNS[o.key.ns] {
			if legion.MatchLabels(term.Services, other.svc.Metadata.Labels) {
				p.prepareCounts(other)
				o.affPref = append(o.affPref, other)
			}
		}
	}
}

// prepareCounts makes sure another owner's per-node counts exist, for
// affinity terms naming it.
func (p *planner) prepareCounts(o *owner) {
	if o.nodeCount != nil {
		return
	}
	o.nodeCount = make([]int32, len(p.nodes))
	for _, e := range o.all {
		if placed(e.t) {
			if i, ok := p.nodeIdx[e.t.Spec.Node]; ok {
				o.nodeCount[i]++
			}
		}
	}
}

func (p *planner) staticFilter(o *owner, n *nodeInfo, cons []legion.Constraint, hasLimits bool) staticResult {
	var r staticResult
	switch n.state {
	case legion.NodeDown:
		r.code = rDown
	case legion.NodeSuspect:
		r.code = rSuspect
	case legion.NodeReady:
	default:
		r.code = rNotReady
	}
	if r.code == rNone {
		switch n.availability() {
		case legion.AvailabilityPause:
			r.code = rPaused
		case legion.AvailabilityDrain:
			r.code = rDraining
		}
	}
	if r.code != rNone {
		return r
	}
	for i, c := range cons {
		if strings.HasPrefix(c.Attr, "node.platform.") && !c.Eval(n.n) {
			return staticResult{code: rPlatformConstraint, idx: int16(i)}
		}
	}
	pl := n.n.Status.Platform
	for _, w := range o.wrong {
		if w.OS == pl.OS && w.Arch == pl.Arch && w.Linux == pl.Linux {
			return staticResult{code: rWrongPlatform}
		}
	}
	if hasLimits && pl.NoLimits {
		return staticResult{code: rNoLimits}
	}
	if n.n.Status.MemoryPressure && avoidsPressure(o) {
		return staticResult{code: rMemoryPressure}
	}
	for i, c := range cons {
		if !strings.HasPrefix(c.Attr, "node.platform.") && !c.Eval(n.n) {
			return staticResult{code: rConstraint, idx: int16(i)}
		}
	}
	for i, t := range n.n.Spec.Taints {
		switch t.Effect {
		case legion.NoSchedule, legion.NoExecute:
			if !tolerates(o.placement.Tolerations, t) {
				return staticResult{code: rTaint, idx: int16(i)}
			}
		case legion.PreferNoSchedule:
			if !tolerates(o.placement.Tolerations, t) {
				r.preferNo = true
			}
		}
	}
	return r
}

// wrongPlatforms lists the platforms a task of the owner, running the same
// images as its pod now, was rejected on and is still in its history.
func wrongPlatforms(o *owner) []legion.Platform {
	var out []legion.Platform
	var images string
	for _, e := range o.all {
		t := e.t
		if t.Status.WrongPlatform == nil || e.deleted {
			continue
		}
		if images == "" {
			images = imageSet(o.pod)
		}
		if imageSet(&t.Spec.Pod) != images {
			continue
		}
		if !slices.Contains(out, *t.Status.WrongPlatform) {
			out = append(out, *t.Status.WrongPlatform)
		}
	}
	return out
}

func imageSet(p *legion.PodSpec) string {
	var imgs []string
	for _, c := range p.AllContainers() {
		imgs = append(imgs, c.Image)
	}
	slices.Sort(imgs)
	imgs = slices.Compact(imgs)
	return strings.Join(imgs, " ")
}

// quotaMessage says how placing a task with req would go over its
// namespace's quota, or "" when it fits.
func (p *planner) quotaMessage(ns string, req legion.ResourceRequests) string {
	n := p.nsOf(ns)
	q := n.quota
	if q == nil {
		return ""
	}
	pre := "over the quota of namespace " + ns + ": "
	if q.CPU != nil && n.used.CPU+req.CPU > *q.CPU {
		return pre + "cpu " + (n.used.CPU + req.CPU).String() + " of " + q.CPU.String()
	}
	if q.Memory != nil && n.used.Memory+req.Memory > *q.Memory {
		return pre + "memory " + (n.used.Memory + req.Memory).String() + " of " + q.Memory.String()
	}
	if q.Tasks != nil && n.tasks+1 > *q.Tasks {
		return pre + "tasks " + strconv.Itoa(n.tasks+1) + " of " + strconv.Itoa(*q.Tasks)
	}
	return ""
}

// placeTask finds the task of e a node, books it there and marks it
// assigned; when no node will do it stays pending with the reasons.
func (p *planner) placeTask(e *entry) bool {
	o := e.owner
	p.prepare(o)
	t := e.t
	if msg := p.securityMessage(t); msg != "" {
		p.pend(e, msg)
		return false
	}
	if msg := p.dependsMessage(o); msg != "" {
		p.pend(e, msg)
		return false
	}
	if msg := p.quotaMessage(t.Metadata.Namespace, o.requests); msg != "" {
		p.pend(e, msg)
		return false
	}
	fixed := -1
	if o.global {
		i, ok := p.nodeIdx[t.Spec.Node]
		if !ok {
			p.pend(e, "node "+t.Spec.Node+" is gone")
			return false
		}
		fixed = i
	}
	pin, volMsg := p.volumeNode(e)
	if volMsg == "" && pin.node != "" {
		volMsg = p.pinMessage(pin)
	}
	if volMsg != "" {
		p.pend(e, volMsg)
		return false
	}
	volNode := pin.node
	general := fixed < 0 && volNode == ""
	if general && o.failMsg != "" {
		p.pend(e, o.failMsg)
		return false
	}
	avoid := failedStartNodes(e.slot)
	var best int
	if fixed >= 0 {
		best = -1
		if o.static[fixed].code == rNone && p.fits(o, fixed, volNode) {
			best = fixed
		}
	} else {
		best = p.pick(o, volNode, avoid)
	}
	if best < 0 {
		msg := p.whyNot(o, fixed, volNode)
		if pin.held {
			_, one := p.firstFailure(o, p.nodeIdx[volNode], volNode)
			msg = "waiting for volume " + pin.volume + ", held by node " + volNode + ", which " + one
		}
		if general {
			o.failMsg = msg
		}
		p.pend(e, msg)
		return false
	}
	t = p.mut(e)
	t.Spec.Node = p.nodes[best].name
	e.node = best
	t.Spec.Placed = p.nowPtr
	t.Status.State = legion.TaskAssigned
	e.st = legion.TaskAssigned
	t.Status.Message = ""
	t.Status.Timestamp = p.now
	p.take(e, best)
	return true
}

// pend keeps a task pending with msg.
func (p *planner) pend(e *entry, msg string) {
	if e.st == legion.TaskPending && e.t.Status.Message == msg {
		return
	}
	t := p.mut(e)
	t.Status.State = legion.TaskPending
	e.st = legion.TaskPending
	t.Status.Message = msg
}

func (p *planner) fits(o *owner, i int, volNode string) bool {
	n := p.nodes[i]
	if volNode != "" && n.name != volNode {
		return false
	}
	if r := o.requests; r.CPU > 0 || r.Memory > 0 {
		room := &p.room[i]
		if (r.CPU > 0 && room.used.CPU+r.CPU > room.alloc.CPU) || (r.Memory > 0 && room.used.Memory+r.Memory > room.alloc.Memory) {
			return false
		}
	}
	for _, a := range o.antiReq {
		if a.nodeCount[i] > 0 {
			return false
		}
	}
	for _, hp := range o.hostPorts {
		if n.ports[hp] > 0 {
			return false
		}
	}
	return true
}

// pick chooses the best node for a task of the owner among its
// candidates, or -1. Nodes are ranked by: no untolerated PreferNoSchedule
// taint, then the spread preferences level by level, then not where the
// slot just failed to start (what failed there may be the node's: an
// image it lacks, a mount it cannot make; Swarm likewise puts nodes with
// recent failures last), then fewest tasks of the owner, then least
// requested, then preferred (anti-)affinity, then name.
//
// The candidates are grouped by PreferNoSchedule and by their innermost
// spread group (see groupCandidates), so the first two keys are settled
// per group: groups are tried best first, those that tie together, and
// only their nodes are scanned. Within a scan the integer keys come first
// and a node that already loses costs a load and a compare.
func (p *planner) pick(o *owner, volNode string, avoid map[string]bool) int {
	levels := min(len(o.spread), 8)
	for tier := range o.tiers {
		groups := o.tiers[tier]
		if len(groups) == 0 {
			continue
		}
		order := p.groupOrder[:0]
		for g := range groups {
			order = append(order, g)
		}
		tuple := func(g int, l int) int32 {
			sl := &o.spread[l]
			return sl.counts[sl.group[groups[g].nodes[0]]]
		}
		cmpGroups := func(a, b int) int {
			for l := 0; l < levels; l++ {
				if x, y := tuple(a, l), tuple(b, l); x != y {
					if x < y {
						return -1
					}
					return 1
				}
			}
			return 0
		}
		if levels > 0 && len(order) > 1 {
			slices.SortStableFunc(order, cmpGroups)
		}
		p.groupOrder = order
		for start := 0; start < len(order); {
			end := start + 1
			for end < len(order) && (levels == 0 || cmpGroups(order[start], order[end]) == 0) {
				end++
			}
			if best := p.scanGroups(o, groups, order[start:end], volNode, avoid); best >= 0 {
				return best
			}
			start = end
		}
	}
	return -1
}

// scanGroups finds the best node that fits in groups that tie on the
// first keys.
func (p *planner) scanGroups(o *owner, groups []nodeGroup, which []int, volNode string, avoid map[string]bool) int {
	best := -1
	var bFailed bool
	var bCount, bAff int32
	var bLoad float64
	hasAff := len(o.antiPref)+len(o.affPref) > 0
	for _, g := range which {
		for _, i := range groups[g].nodes {
			failed := avoid != nil && avoid[p.nodes[i].name]
			better := best < 0
			if !better {
				if failed && !bFailed {
					continue
				}
				better = !failed && bFailed
			}
			count := o.nodeCount[i]
			if !better {
				if count > bCount {
					continue
				}
				better = count < bCount
			}
			load := p.load(o, i)
			if !better {
				if load > bLoad {
					continue
				}
				better = load < bLoad
			}
			var aff int32
			if hasAff {
				for _, a := range o.antiPref {
					aff += a.nodeCount[i]
				}
				for _, a := range o.affPref {
					aff -= a.nodeCount[i]
				}
				if !better {
					if aff > bAff {
						continue
					}
					better = aff < bAff
				}
			}
			if !better && i > best {
				continue // a full tie: the earlier name stays
			}
			if !p.fits(o, i, volNode) {
				continue
			}
			best, bCount, bFailed, bLoad, bAff = i, count, failed, load, aff
		}
	}
	return best
}

// nodeGroup is candidates that share the PreferNoSchedule key and every
// spread group, in node order.
type nodeGroup struct {
	nodes []int
}

// groupCandidates sorts the owner's candidates into tiers (without, then
// with an untolerated PreferNoSchedule taint) of groups by innermost
// spread group.
func (o *owner) groupCandidates() {
	o.tiers = [2][]nodeGroup{}
	var leafIdx [2]map[int32]int
	for _, i := range o.candidates {
		tier := 0
		if o.static[i].preferNo {
			tier = 1
		}
		var leaf int32
		if n := len(o.spread); n > 0 {
			leaf = o.spread[n-1].group[i]
		}
		if leafIdx[tier] == nil {
			leafIdx[tier] = map[int32]int{}
		}
		g, ok := leafIdx[tier][leaf]
		if !ok {
			g = len(o.tiers[tier])
			leafIdx[tier][leaf] = g
			o.tiers[tier] = append(o.tiers[tier], nodeGroup{})
		}
		o.tiers[tier][g].nodes = append(o.tiers[tier][g].nodes, i)
	}
}

// load is how much of the node's CPU and memory would be requested with the
// task on it.
func (p *planner) load(o *owner, i int) float64 {
	r := &p.room[i]
	return r.load + float64(o.requests.CPU)*r.invCPU + float64(o.requests.Memory)*r.invMem
}

// failedStartNodes lists the nodes where the slot's last tasks failed
// before they started, so a retry goes elsewhere when another node does as
// well (a bad node should not take every retry).
func failedStartNodes(s *slot) map[string]bool {
	if s == nil {
		return nil
	}
	var out map[string]bool
	seen := 0
	for i := len(s.entries) - 1; i >= 0 && seen < FailedStartsInRow; i-- {
		t := s.entries[i].t
		if live(t) {
			continue
		}
		seen++
		if st := stateOf(t); (st == legion.TaskFailed || st == legion.TaskRejected) && t.Status.Started == nil && t.Spec.Node != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[t.Spec.Node] = true
		}
	}
	return out
}

// whyNot counts, per reason, the nodes that cannot take the owner's task,
// each under the first filter it fails.
func (p *planner) whyNot(o *owner, fixed int, volNode string) string {
	counts := map[string]int{}
	singular := map[string]string{}
	check := func(i int) {
		key, one := p.firstFailure(o, i, volNode)
		counts[key]++
		singular[key] = one
	}
	if fixed >= 0 {
		check(fixed)
	} else {
		for i := range p.nodes {
			check(i)
		}
	}
	if len(counts) == 0 {
		return "no node can run it: there are no nodes"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		if counts[k] == 1 {
			parts[i] = "1 node " + singular[k]
		} else {
			parts[i] = strconv.Itoa(counts[k]) + " nodes " + k
		}
	}
	return "no node can run it: " + strings.Join(parts, ", ")
}

// firstFailure names the first filter node i fails for the owner, in the
// plural and singular.
func (p *planner) firstFailure(o *owner, i int, volNode string) (plural, singular string) {
	n := p.nodes[i]
	st := o.static[i]
	cons := o.placement.Constraints
	switch st.code {
	case rDown:
		return "are down", "is down"
	case rSuspect:
		return "are suspect", "is suspect"
	case rNotReady:
		return "are not ready", "is not ready"
	case rPaused:
		return "are paused", "is paused"
	case rDraining:
		return "are draining", "is draining"
	case rPlatformConstraint:
		return "fail " + cons[st.idx], "fails " + cons[st.idx]
	case rWrongPlatform:
		pl := n.n.Status.Platform
		what := pl.OS + "/" + pl.Arch
		return "have no image for its platform " + what, "has no image for its platform " + what
	case rNoLimits:
		return "cannot enforce limits (racct off)", "cannot enforce limits (racct off)"
	case rMemoryPressure:
		return "are under memory pressure (it requests no memory)", "is under memory pressure (it requests no memory)"
	}
	r := o.requests
	room := &p.room[i]
	if r.CPU > 0 && room.used.CPU+r.CPU > room.alloc.CPU {
		return "have too little cpu", "has too little cpu"
	}
	if r.Memory > 0 && room.used.Memory+r.Memory > room.alloc.Memory {
		return "have too little memory", "has too little memory"
	}
	switch st.code {
	case rConstraint:
		return "fail " + cons[st.idx], "fails " + cons[st.idx]
	case rTaint:
		ts := n.n.Spec.Taints[st.idx].String()
		return "have untolerated taint " + ts, "has untolerated taint " + ts
	}
	for _, a := range o.antiReq {
		if a.nodeCount[i] > 0 {
			return "run tasks it must avoid", "runs tasks it must avoid"
		}
	}
	for _, hp := range o.hostPorts {
		if n.ports[hp] > 0 {
			s := fmt.Sprintf("host port %d/%s in use", hp.port, hp.proto)
			return "have " + s, "has " + s
		}
	}
	if volNode != "" && n.name != volNode {
		s := "the node holding its volume, " + volNode
		return "are not " + s, "is not " + s
	}
	return "are busy", "is busy"
}

// taskVolumes resolves the pod's volumes to Volume objects: a claim to the
// ordinal's own <claim>-<service>-<n>.
func (p *planner) taskVolumes(o *owner, ordinal int) map[string]string {
	var out map[string]string
	for _, v := range o.pod.Volumes {
		name := ""
		switch {
		case v.Volume != nil:
			name = v.Volume.Name
		case v.Claim != nil:
			name = ClaimName(v.Name, o.key.name, ordinal)
		default:
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[v.Name] = name
	}
	return out
}

// ClaimName is the Volume a stateful service's claim makes for an
// ordinal: <claim>-<service>-<ordinal>.
func ClaimName(claim, svc string, ordinal int) string {
	return claim + "-" + svc + "-" + strconv.Itoa(ordinal)
}

// volumePin is the node a task must go to for the Volumes it mounts.
type volumePin struct {
	node   string
	volume string // namespace/name of the Volume that pins it
	held   bool   // an iSCSI or unshared plugin Volume in use there, not ZFS data
}

// volumeNode is the node holding the Volumes the task mounts (a ZFS
// Volume's data, or an iSCSI or unshared plugin Volume while a node uses
// it), which it must go to, or why it cannot go anywhere yet.
func (p *planner) volumeNode(e *entry) (pin volumePin, msg string) {
	for _, name := range sortedValues(e.t.Spec.Volumes) {
		v := p.volumes[nsName{e.t.Metadata.Namespace, name}]
		if v == nil || v.Spec.Shared() {
			continue
		}
		full := e.t.Metadata.Namespace + "/" + name
		at, held := v.Status.Node, v.Spec.Driver != legion.DriverZFS
		if !held {
			if m := v.Status.Migration; m != nil {
				return volumePin{}, "volume " + full + " is moving to node " + m.To
			}
			if at == "" {
				at = v.Spec.Node
			}
		}
		if at == "" {
			continue
		}
		if pin.node != "" && pin.node != at {
			return volumePin{}, "its volumes are on different nodes: " + pin.node + " and " + at
		}
		if pin.node == "" {
			pin = volumePin{node: at, volume: full, held: held}
		}
	}
	return pin, ""
}

// pinMessage says why a task pinned to a node by a Volume cannot go there
// when the node is missing or not ready (it waits; it never starts
// elsewhere), or "" when the usual filters tell.
func (p *planner) pinMessage(pin volumePin) string {
	what := "waiting for volume " + pin.volume + " on node " + pin.node
	if pin.held {
		what = "waiting for volume " + pin.volume + ", held by node " + pin.node
	}
	i, ok := p.nodeIdx[pin.node]
	if !ok {
		return what + ", which does not exist"
	}
	if st := p.nodes[i].state; st != legion.NodeReady {
		if st == "" {
			st = legion.NodeUnknown
		}
		return what + ", which is " + string(st)
	}
	return ""
}
