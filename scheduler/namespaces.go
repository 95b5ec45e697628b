package scheduler

import (
	"fmt"
	"time"

	"github.com/legionbsd/legion"
)

// Demand is what namespace ns's Services and Volumes want in all, as
// admission holds it to the namespace's quota (3.3.1): each service its
// replicas (a global one, a task per eligible node of st.Nodes; an
// autoscaled one, its autoscale.max, so it fits whatever it scales to)
// times its pod's requests, with one task more for a start-first update (see
// UpdateSurge), and every Volume with its size, counting the Volumes a
// stateful service's claims will make for its wanted ordinals (and an
// existing claim Volume at its claim's size, as it will be resized).
// Jobs are not counted: their tasks beyond the quota wait pending.
func Demand(ns string, st *State) legion.QuotaUsage {
	var u legion.QuotaUsage
	vols := map[string]legion.Bytes{}
	for _, v := range st.Volumes {
		if v.Metadata.Namespace == ns {
			vols[v.Metadata.Name] = v.Spec.Size
		}
	}
	var p *planner
	for _, s := range st.Services {
		if s.Metadata.Namespace != ns {
			continue
		}
		n := s.WantedReplicas()
		if a := s.Spec.Autoscale; a != nil {
			n = a.Max
		}
		if s.Spec.Mode == legion.ModeGlobal {
			if p == nil {
				p = newPlanner(&State{Nodes: st.Nodes}, time.Time{})
			}
			n = p.eligibleNodes(newServiceOwner(s))
		}
		req := s.Spec.Pod.Requests()
		tasks := n + UpdateSurge(s, n)
		u.CPU += legion.CPU(tasks) * req.CPU
		u.Memory += legion.Bytes(tasks) * req.Memory
		u.Tasks += tasks
		if s.Spec.Mode != legion.ModeStateful {
			continue
		}
		for ord := 0; ord < n; ord++ {
			for _, pv := range s.Spec.Pod.Volumes {
				if pv.Claim != nil {
					vols[ClaimName(pv.Name, s.Metadata.Name, ord)] = pv.Claim.Size
				}
			}
		}
	}
	u.Volumes = len(vols)
	for _, size := range vols {
		u.Storage += size
	}
	return u
}

// UpdateSurge is the tasks a service running n tasks needs beside them
// for an update: one for a start-first update, whose new task runs beside
// the old one until it is ready. Under a quota with no room for it, that
// task would wait pending at the quota, and the update, waiting for it,
// would never go on; so admission counts it (3.3.1). Parallel slots past
// the first wait their turn at the quota instead, and the update goes on.
func UpdateSurge(s *legion.Service, n int) int {
	if n > 0 && s.Spec.Update.Order == legion.StartFirst {
		return 1
	}
	return 0
}

// eligibleNodes counts the nodes a global owner runs a task on now: those
// its placement allows that are ready or only suspect, and active.
func (p *planner) eligibleNodes(o *owner) int {
	cons, _ := legion.ParseConstraints(o.placement.Constraints)
	hasLimits := o.pod.HasLimits()
	n := 0
	for _, ni := range p.nodes {
		switch p.staticFilter(o, ni, cons, hasLimits).code {
		case rNone, rSuspect:
			n++
		}
	}
	return n
}

// namespaceUsage writes each namespace's status.used as this pass leaves
// it: the requests and count of its placed tasks, its Volumes with their
// sizes, and the objects the snapshot counted.
func (p *planner) namespaceUsage() {
	used := make(map[string]*legion.QuotaUsage, len(p.st.Namespaces))
	for _, n := range p.st.Namespaces {
		used[n.Metadata.Name] = &legion.QuotaUsage{Objects: p.st.Objects[n.Metadata.Name]}
	}
	for _, e := range p.entries {
		if e.deleted || !placed(e.t) {
			continue
		}
		u := used[e.t.Metadata.Namespace]
		if u == nil {
			continue
		}
		req := e.owner.requestsOf(e.t)
		u.CPU += req.CPU
		u.Memory += req.Memory
		u.Tasks++
	}
	for k, v := range p.volumes {
		if u := used[k.ns]; u != nil {
			u.Volumes++
			u.Storage += v.Spec.Size
		}
	}
	for _, n := range p.st.Namespaces {
		u := used[n.Metadata.Name]
		if old := n.Status.Used; old != nil && *old == *u {
			continue
		}
		out := *n
		out.Status.Used = u
		p.res.UpdateNamespaces = append(p.res.UpdateNamespaces, &out)
	}
}

// securityMessage says why a task's pod may not start in its namespace
// now: it loosens its jails more than the namespace's allow-list, which
// may have been tightened since its spec was admitted (9).
func (p *planner) securityMessage(t *legion.Task) string {
	n := p.nsOf(t.Metadata.Namespace)
	return n.security.ExcessMessage(t.Metadata.Namespace, &t.Spec.Pod, "spec.pod")
}

// overTaskQuota says why an owner's next task is not made: its
// namespace's quota bounds its tasks and it holds that many that have not
// ended, placed or waiting. A Job's tasks are not counted when it is
// applied, nor a Service's that its autoscaler adds or a quota lowered
// since leaves over; made past the quota, each would wait as a pending
// Task, and Jobs of many completions would fill the managers' store
// whatever the quota. As a Kubernetes pod that its ResourceQuota refuses,
// the task is made once one ends. Empty when the task may be made.
func (p *planner) overTaskQuota(ns string) string {
	q := p.nsOf(ns).quota
	if q == nil || q.Tasks == nil {
		return ""
	}
	if p.liveByNS == nil {
		p.liveByNS = map[string]int{}
		for _, e := range p.entries {
			if e.live() && !e.deleted {
				p.liveByNS[e.t.Metadata.Namespace]++
			}
		}
	}
	if n := p.liveByNS[ns]; n >= *q.Tasks {
		return fmt.Sprintf("no more tasks made: namespace %s has %d tasks not ended, as many as its quota of tasks allows", ns, n)
	}
	return ""
}
