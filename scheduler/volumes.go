package scheduler

import (
	"reflect"
	"slices"
	"strconv"

	"github.com/legionbsd/legion"
)

// volState is what this pass worked out about one Volume.
type volState struct {
	orig  *legion.Volume // as the snapshot holds it
	users []*entry       // tasks mounting it
	// wait says why a Volume a drain wants moved has no migration yet.
	wait string
	// held: a drain wants it moved, so its tasks on the draining node stay
	// until the copy is in.
	held bool
}

// indexVolumes files each task under the Volumes it mounts.
func (p *planner) indexVolumes() {
	p.vols = make(map[nsName]*volState, len(p.st.Volumes))
	for _, v := range p.st.Volumes {
		p.vols[nsName{v.Metadata.Namespace, v.Metadata.Name}] = &volState{orig: v}
	}
	for _, e := range p.entries {
		for _, name := range e.t.Spec.Volumes {
			if vs := p.vols[nsName{e.t.Metadata.Namespace, name}]; vs != nil {
				vs.users = append(vs.users, e)
			}
		}
	}
}

// volumeKeys lists the Volumes by namespace and name, for a pass that
// does not depend on the snapshot's order.
func (p *planner) volumeKeys() []nsName {
	keys := make([]nsName, 0, len(p.vols))
	for k := range p.vols {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nsName) int {
		if a.ns != b.ns {
			if a.ns < b.ns {
				return -1
			}
			return 1
		}
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	return keys
}

// volMut returns the Volume of key for changing, copying it (and its
// migration) on first change; the copy is written at the end of the pass
// unless it ends up as stored.
func (p *planner) volMut(key nsName) *legion.Volume {
	if v, ok := p.volOut[key]; ok {
		return v
	}
	c := *p.volumes[key]
	if m := c.Status.Migration; m != nil {
		mc := *m
		c.Status.Migration = &mc
	}
	if p.volOut == nil {
		p.volOut = map[nsName]*legion.Volume{}
	}
	p.volOut[key] = &c
	p.volumes[key] = &c
	return &c
}

// volumesBefore runs before the owners: it frees the Volumes of removed
// nodes, drops migrations nothing calls for any more or whose target went
// away, and records the migrations drains and spec.node call for, so the
// owners' passes see them (the tasks using a Volume being copied stay).
func (p *planner) volumesBefore() {
	p.indexVolumes()
	for _, key := range p.volumeKeys() {
		p.freeRemoved(key)
		if p.volumes[key].Spec.Driver == legion.DriverZFS {
			p.migrate(key)
		}
	}
}

// freeRemoved lets go of a Volume held by a node that is no longer in the
// cluster: removing a node is the word that it runs nothing, so its data
// (a ZFS dataset) is gone and a LUN or plugin volume it held is free.
func (p *planner) freeRemoved(key nsName) {
	v := p.volumes[key]
	node := v.Status.Node
	if node != "" {
		if _, ok := p.nodeIdx[node]; !ok {
			w := p.volMut(key)
			w.Status.Node, w.Status.Backend, w.Status.Migration, w.Status.Snapshots = "", "", nil, nil
			if v.Spec.Driver == legion.DriverZFS {
				w.Status.Message = "node " + node + " was removed; the data it held went with it"
			} else {
				w.Status.Message = "node " + node + " was removed, which let go of it"
			}
			return
		}
	}
	if m := v.Status.Migration; m != nil {
		_, fromOK := p.nodeIdx[m.From]
		if !fromOK || m.From != node {
			// The data is not where the migration would send it from.
			p.volMut(key).Status.Migration = nil
		}
	}
}

// migrate keeps a ZFS Volume's migration in line with what calls for it:
// a drain of the node holding it (for a wanted stateful ordinal) or a
// spec.node naming another node.
func (p *planner) migrate(key nsName) {
	v := p.volumes[key]
	vs := p.vols[key]
	from := v.Status.Node
	if from == "" {
		return
	}
	fi := p.nodeIdx[from]
	fromN := p.nodes[fi]
	draining := fromN.availability() == legion.AvailabilityDrain
	o := p.ordinalOwner(v)
	// Where it should go: the node spec.node names once that node may take
	// it, else, off a draining node, wherever its service may run.
	spec := ""
	if v.Spec.Node != "" && v.Spec.Node != from && p.moveTargetOK(v.Spec.Node) {
		spec = v.Spec.Node
	}
	byDrain := spec == "" && draining && o != nil
	vs.held = byDrain

	if m := v.Status.Migration; m != nil {
		keep := p.moveTargetOK(m.To)
		switch {
		case !keep:
		case m.State == legion.MigrationFinishing:
			// The last part is under way: only its target going away stops it.
		case spec != "":
			keep = m.To == spec
		case byDrain:
			keep = p.eligible(o, m.To)
		default:
			// The node holding it is active again, or nothing calls for it.
			keep = false
		}
		if keep {
			vs.held = vs.held || draining
			return
		}
		p.volMut(key).Status.Migration = nil
	}
	if spec == "" && !byDrain {
		return
	}
	if fromN.state != legion.NodeReady {
		// Its only copy is there and cannot be sent now.
		vs.wait = "waiting: node " + from + " is " + string(fromN.state)
		return
	}
	to := spec
	if to == "" {
		to = p.migrationTarget(o, fi)
	}
	if to == "" {
		vs.wait = "waiting: no node can take it"
		return
	}
	p.volMut(key).Status.Migration = &legion.VolumeMigration{State: legion.MigrationCopying, From: from, To: to}
}

// ordinalOwner is the stateful service whose wanted ordinal claims the
// Volume, or nil. The labels say which ordinal; the name must be that
// ordinal's claim too: a backup restored under another name keeps the
// labels, and is no ordinal's Volume.
func (p *planner) ordinalOwner(v *legion.Volume) *owner {
	svc, ok := v.Metadata.Labels[LabelService]
	if !ok {
		return nil
	}
	ord, err := strconv.Atoi(v.Metadata.Labels[LabelOrdinal])
	if err != nil {
		return nil
	}
	o := p.owners[ownerKey{legion.KindService, v.Metadata.Namespace, svc}]
	if o == nil || !o.stateful || ord < 0 || ord >= o.svc.WantedReplicas() {
		return nil
	}
	for _, pv := range o.pod.Volumes {
		if pv.Claim != nil && ClaimName(pv.Name, svc, ord) == v.Metadata.Name {
			return o
		}
	}
	return nil
}

// moveTargetOK: the node exists, is not down or unknown (a node only
// suspect keeps a move, which would otherwise send the full copy again
// elsewhere) and is active.
func (p *planner) moveTargetOK(name string) bool {
	i, ok := p.nodeIdx[name]
	if !ok {
		return false
	}
	n := p.nodes[i]
	return (n.state == legion.NodeReady || n.state == legion.NodeSuspect) && n.availability() == legion.AvailabilityActive
}

// eligible: the service's placement still allows the node (a suspect node
// counts, as above).
func (p *planner) eligible(o *owner, name string) bool {
	p.prepare(o)
	i := p.nodeIdx[name]
	c := o.static[i].code
	return c == rNone || c == rSuspect
}

// migrationTarget picks the node a Volume of the owner moves to off node
// from: one its tasks may be placed on, with the fewest of them, then the
// least requested, then by name; "" when none will do.
func (p *planner) migrationTarget(o *owner, from int) string {
	p.prepare(o)
	best := -1
	for _, i := range o.candidates {
		if i == from || !p.fits(o, i, "") {
			continue
		}
		if best < 0 || o.nodeCount[i] < o.nodeCount[best] ||
			(o.nodeCount[i] == o.nodeCount[best] && p.load(o, i) < p.load(o, best)) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return p.nodes[best].name
}

// volumesAfter runs after the owners: a copied Volume with no task left
// using it on its old node goes on to finishing, unless the migrator
// put off its next attempt.
func (p *planner) volumesAfter() {
	for _, key := range p.volumeKeys() {
		v := p.volumes[key]
		m := v.Status.Migration
		if m == nil || m.State != legion.MigrationCopied {
			continue
		}
		if m.NextAttempt != nil && m.NextAttempt.After(p.now) {
			p.wake(*m.NextAttempt)
			continue
		}
		fi := p.nodeIdx[m.From]
		if p.nodes[fi].state != legion.NodeReady || p.usedOn(key, fi) {
			continue
		}
		p.volMut(key).Status.Migration.State = legion.MigrationFinishing
	}
}

// usedOn reports whether a task on node i that is not known to have
// stopped mounts the Volume.
func (p *planner) usedOn(key nsName, i int) bool {
	for _, e := range p.vols[key].users {
		if e.node == i && e.t.Spec.Placed != nil && !e.deleted && (e.live() || e.st == legion.TaskOrphaned) {
			return true
		}
	}
	return false
}

// volumeLeave says why a placed task must leave its node for a Volume it
// mounts: the Volume's copy is on its new node and the task on the old one
// has to stop for the last part to go.
func (p *planner) volumeLeave(e *entry) string {
	if e.node < 0 || len(e.t.Spec.Volumes) == 0 {
		return ""
	}
	for _, name := range sortedValues(e.t.Spec.Volumes) {
		v := p.volumes[nsName{e.t.Metadata.Namespace, name}]
		if v == nil {
			continue
		}
		m := v.Status.Migration
		if m != nil && m.From == p.nodes[e.node].name && (m.State == legion.MigrationCopied || m.State == legion.MigrationFinishing) {
			return "volume " + e.t.Metadata.Namespace + "/" + name + " is moving to node " + m.To
		}
	}
	return ""
}

// volumeStay says why a task on a draining node stays for now: a Volume it
// mounts has its data there and is still being copied off, or waits for a
// node to take it.
func (p *planner) volumeStay(e *entry) string {
	if e.node < 0 || len(e.t.Spec.Volumes) == 0 {
		return ""
	}
	node := p.nodes[e.node].name
	for _, name := range sortedValues(e.t.Spec.Volumes) {
		key := nsName{e.t.Metadata.Namespace, name}
		v, vs := p.volumes[key], p.vols[key]
		if v == nil || vs == nil || !vs.held || v.Status.Node != node {
			continue
		}
		what := "volume " + key.ns + "/" + key.name
		if m := v.Status.Migration; m != nil {
			return "waiting for " + what + " to be copied to node " + m.To
		}
		return "waiting for " + what + " to move (" + vs.wait + ")"
	}
	return ""
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// drainVolumes lists the Volumes a draining node still holds that must
// move first, each with where its move stands.
func (p *planner) drainVolumes(n *nodeInfo) []legion.DrainItem {
	var items []legion.DrainItem
	for _, key := range p.volumeKeys() {
		v, vs := p.volumes[key], p.vols[key]
		m := v.Status.Migration
		if v.Status.Node != n.name || (m == nil && !vs.held) {
			continue
		}
		reason := vs.wait
		if reason == "" {
			reason = "waiting: no node can take it"
		}
		if m != nil {
			switch m.State {
			case legion.MigrationCopying:
				reason = "copying to node " + m.To
			case legion.MigrationCopied:
				reason = "copied to node " + m.To + ", its tasks here stopping"
			case legion.MigrationFinishing:
				reason = "finishing on node " + m.To
			default:
				reason = m.State + " to node " + m.To
			}
			if m.Message != "" {
				reason += "; attempt " + strconv.Itoa(m.Attempt) + " failed: " + m.Message
			}
		}
		items = append(items, legion.DrainItem{Kind: legion.KindVolume, Name: key.ns + "/" + key.name, Reason: reason})
	}
	return items
}

// volumeWrites adds the Volumes the pass changed to the result, leaving
// out those that came back to what is stored.
func (p *planner) volumeWrites() {
	for key, w := range p.volOut {
		if vs := p.vols[key]; vs != nil && reflect.DeepEqual(vs.orig.Spec, w.Spec) && reflect.DeepEqual(vs.orig.Status, w.Status) {
			continue
		}
		p.res.UpdateVolumes = append(p.res.UpdateVolumes, w)
	}
}
