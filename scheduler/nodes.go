package scheduler

import (
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// nodeInfo is a node as this pass sees it: its health, and what its
// placed tasks take.
type nodeInfo struct {
	n     *legion.Node
	name  string
	state legion.NodeState
	out   *legion.Node // the node's write, if any

	noExecute bool // it has a NoExecute taint
	ports     map[hostPort]int
	tasks     []*entry // tasks naming this node, live or orphaned
}

// nodeRoom is what placement reads of a node for every candidate, kept in
// one array apart from the rest so the scan over nodes stays in cache:
// what its placed tasks request, what it has, the share of CPU plus that
// of memory requested, and 1/allocatable (0 when there is none).
type nodeRoom struct {
	used, alloc          legion.ResourceRequests
	load, invCPU, invMem float64
}

func newNodeInfo(n *legion.Node) *nodeInfo {
	ni := &nodeInfo{n: n, name: n.Metadata.Name, state: n.Status.State}
	for _, t := range n.Spec.Taints {
		ni.noExecute = ni.noExecute || t.Effect == legion.NoExecute
	}
	return ni
}

func newNodeRoom(n *legion.Node) nodeRoom {
	r := nodeRoom{alloc: n.Status.Resources.Allocatable}
	if r.alloc.CPU > 0 {
		r.invCPU = 1 / float64(r.alloc.CPU)
	}
	if r.alloc.Memory > 0 {
		r.invMem = 1 / float64(r.alloc.Memory)
	}
	return r
}

func (n *nodeInfo) availability() legion.Availability {
	if n.n.Spec.Availability == "" {
		return legion.AvailabilityActive
	}
	return n.n.Spec.Availability
}

// schedulable: ready and active, so it may get new tasks.
func (n *nodeInfo) schedulable() bool {
	return n.state == legion.NodeReady && n.availability() == legion.AvailabilityActive
}

func (p *planner) nodeOut(n *nodeInfo) *legion.Node {
	if n.out == nil {
		c := *n.n
		n.out = &c
	}
	return n.out
}

// nodeHealth works out each node's state from its heartbeats: suspect
// after three missed, down after eight; a new leader marks nothing suspect
// before hearing from the node and nothing down within eight periods of
// taking over.
func (p *planner) nodeHealth() {
	suspect := SuspectAfter * legion.HeartbeatPeriod
	down := DownAfter * legion.HeartbeatPeriod
	settleAt := p.st.LeaderSince.Add(down)
	settled := !p.now.Before(settleAt)
	for _, n := range p.nodes {
		old := n.n.Status.State
		hb, heard := p.st.Heartbeats[n.name]
		var st legion.NodeState
		if heard {
			silent := p.now.Sub(hb)
			switch {
			case silent >= down && settled:
				st = legion.NodeDown
			case silent >= suspect:
				st = legion.NodeSuspect
				p.wake(latest(hb.Add(down), settleAt))
			default:
				st = legion.NodeReady
				p.wake(hb.Add(suspect))
			}
		} else {
			st = old
			if settled {
				st = legion.NodeDown
			} else {
				if st == "" {
					st = legion.NodeUnknown
				}
				p.wake(settleAt)
			}
		}
		n.state = st
		if st != old {
			p.nodeOut(n).Status.State = st
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// orphanLost marks a live task of a down (or removed) node orphaned and
// told to stop, in one write, so its slot is refilled at once.
func (p *planner) orphanLost(e *entry) {
	t := e.t
	if !e.live() || t.Spec.Node == "" || t.Spec.Placed == nil {
		return
	}
	msg := ""
	switch {
	case e.node < 0:
		msg = "node " + t.Spec.Node + " is gone"
	case p.nodes[e.node].state == legion.NodeDown:
		msg = "node " + t.Spec.Node + " went down" // true still once it is back
	default:
		return
	}
	t = p.mut(e)
	t.Status.State = legion.TaskOrphaned
	t.Status.Ready = false
	// Nothing is known of its containers any more: none counts as ready
	// (legion tasks showed 1/1 beside "node went down").
	if len(t.Status.Containers) > 0 {
		cs := slices.Clone(t.Status.Containers)
		for i := range cs {
			cs[i].Ready = false
		}
		t.Status.Containers = cs
	}
	e.st, e.ready = legion.TaskOrphaned, false
	t.Status.Message = msg
	t.Status.Timestamp = p.now
	t.Spec.DesiredState = legion.TaskShutdown
	e.run = false
}

// account books what a placed task takes on its node and in its
// namespace, and files the tasks of draining nodes for the drain status.
func (p *planner) account(e *entry) {
	i := e.node
	if i < 0 {
		return
	}
	if n := p.nodes[i]; n.availability() == legion.AvailabilityDrain && (e.live() || e.st == legion.TaskOrphaned) {
		n.tasks = append(n.tasks, e)
	}
	if e.placed() {
		p.take(e, i)
	}
}

// take books a placed task's requests and host ports on node i, and in its
// namespace and owner.
func (p *planner) take(e *entry, i int) {
	n := p.nodes[i]
	req := e.owner.requestsOf(e.t)
	r := &p.room[i]
	r.used.CPU += req.CPU
	r.used.Memory += req.Memory
	r.load = float64(r.used.CPU)*r.invCPU + float64(r.used.Memory)*r.invMem
	for _, hp := range hostPortsOf(e.owner) {
		if n.ports == nil {
			n.ports = map[hostPort]int{}
		}
		n.ports[hp]++
	}
	o := e.owner
	if o.ns == nil {
		o.ns = p.nsOf(o.key.ns)
	}
	ns := o.ns
	ns.used.CPU += req.CPU
	ns.used.Memory += req.Memory
	ns.tasks++
	e.owner.taskOn(i, 1)
}

func hostPortsOf(o *owner) []hostPort {
	if o.svc == nil || o.portsKnown {
		return o.hostPorts
	}
	o.portsKnown = true
	for _, sp := range o.svc.Spec.Endpoint.Ports {
		if sp.Publish == legion.PublishHost && sp.PublishedPort != 0 {
			o.hostPorts = append(o.hostPorts, hostPort{sp.Protocol, sp.PublishedPort})
		}
	}
	return o.hostPorts
}

// drainStatus writes where each draining node's drain stands, and clears
// it from nodes no longer draining.
func (p *planner) drainStatus() {
	for _, n := range p.nodes {
		if n.availability() != legion.AvailabilityDrain {
			if n.n.Status.Drain != nil {
				p.nodeOut(n).Status.Drain = nil
			}
			continue
		}
		var items []legion.DrainItem
		reachable := n.state == legion.NodeReady
		for _, e := range n.tasks {
			t := e.t
			name := t.Metadata.Namespace + "/" + t.Metadata.Name
			if e.deleted {
				continue
			}
			switch {
			case stateOf(t) == legion.TaskOrphaned:
				if !reachable {
					items = append(items, legion.DrainItem{Kind: legion.KindTask, Name: name, Reason: "unconfirmed"})
				}
			case !live(t):
			case !reachable:
				items = append(items, legion.DrainItem{Kind: legion.KindTask, Name: name, Reason: "unreachable"})
			case t.Spec.DesiredState != legion.TaskRunning:
				items = append(items, legion.DrainItem{Kind: legion.KindTask, Name: name, Reason: "stopping"})
			default:
				r := e.drainReason
				if r == "" {
					r = "waiting to be moved"
				}
				items = append(items, legion.DrainItem{Kind: legion.KindTask, Name: name, Reason: r})
			}
		}
		items = append(items, p.drainVolumes(n)...)
		slices.SortFunc(items, func(a, b legion.DrainItem) int {
			if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		ds := &legion.DrainStatus{State: legion.DrainDraining, Remaining: items}
		switch {
		case len(items) == 0:
			ds.State = legion.DrainCompleted
		case !reachable:
			ds.State = legion.DrainBlocked
		}
		if !sameDrain(n.n.Status.Drain, ds) {
			p.nodeOut(n).Status.Drain = ds
		}
	}
}

func sameDrain(a, b *legion.DrainStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.State == b.State && slices.Equal(a.Remaining, b.Remaining)
}

// taints: the node's taints the owner does not tolerate, by effect.
func untolerated(n *legion.Node, tol []legion.Toleration, effect legion.TaintEffect) (legion.Taint, bool) {
	for _, t := range n.Spec.Taints {
		if t.Effect != effect {
			continue
		}
		if !tolerates(tol, t) {
			return t, true
		}
	}
	return legion.Taint{}, false
}

func tolerates(tol []legion.Toleration, t legion.Taint) bool {
	return slices.ContainsFunc(tol, func(x legion.Toleration) bool { return x.Covers(legion.Toleration(t)) })
}
