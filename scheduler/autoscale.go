package scheduler

import (
	"math"
	"slices"

	"github.com/legionbsd/legion"
)

// autoscale returns the replica count a service wants now. For a
// replicated service with autoscale it works the count out from its ready
// tasks' reported use (4.2): ceil(sum of use / target) for the target
// asking most, kept while use is within a tenth of every target, grown at
// once, shrunk only to the most recommended over the last downDelay, and
// not shrunk within downDelay of this leader taking over.
func (p *planner) autoscale(o *owner, sp *svcPass) int {
	svc := o.svc
	a := svc.Spec.Autoscale
	if a == nil || svc.Spec.Mode != legion.ModeReplicated {
		return svc.WantedReplicas()
	}
	cur := 0
	if sp.status.Autoscale != nil {
		cur = sp.status.Autoscale.Replicas
	}
	if cur <= 0 && svc.Spec.Replicas != nil {
		cur = *svc.Spec.Replicas
	}
	cur = min(max(cur, a.Min), a.Max)

	var req legion.ResourceRequests
	for _, c := range o.pod.Containers {
		req.CPU += c.Resources.Requests.CPU
		req.Memory += c.Resources.Requests.Memory
	}
	var cpuUse, memUse []float64
	ready := 0
	for _, e := range o.all {
		t := e.t
		if e.deleted || t.Spec.DesiredState != legion.TaskRunning || !readyTask(t) {
			continue
		}
		ready++
		u, ok := p.usage(t)
		if !ok {
			continue
		}
		if req.CPU > 0 {
			cpuUse = append(cpuUse, float64(u.CPU)*100/float64(req.CPU))
		}
		if req.Memory > 0 {
			memUse = append(memUse, float64(u.Memory)*100/float64(req.Memory))
		}
	}
	rec := cur
	if ready > 0 {
		// want is a target's count, or -1 when it has none to give (no
		// target, no reports). An idle service's count is 0, which the
		// minimum then raises: it is a recommendation, not none.
		want := func(target int, uses []float64) int {
			if target <= 0 || len(uses) == 0 {
				return -1
			}
			var sum float64
			for _, x := range uses {
				sum += x
			}
			avg := sum / float64(len(uses))
			if math.Abs(avg-float64(target)) <= float64(target)/10 {
				return cur
			}
			// Ready tasks without a report: idle for growing, on target
			// for shrinking.
			grow := int(math.Ceil(sum/float64(target) - 1e-9))
			if grow > cur {
				return grow
			}
			shrink := grow + (ready - len(uses))
			return min(shrink, cur)
		}
		rec = max(want(a.CPU, cpuUse), want(a.Memory, memUse))
		if rec < 0 {
			rec = cur
		}
	}
	rec = min(max(rec, a.Min), a.Max)

	st := legion.AutoscaleStatus{Replicas: cur}
	if old := sp.status.Autoscale; old != nil {
		st.Recommendations = slices.Clone(old.Recommendations)
		st.Message = old.Message
	}
	recs := st.Recommendations
	if len(recs) == 0 || recs[len(recs)-1].Replicas != rec {
		recs = append(recs, legion.Recommendation{Time: p.now, Replicas: rec})
	}
	downDelay := legion.DefaultDownDelay.D()
	if a.DownDelay != nil {
		downDelay = a.DownDelay.D()
	}
	windowStart := p.now.Add(-downDelay)
	// A recommendation holds until the next one; drop those over before
	// the window.
	for len(recs) > 1 && !recs[1].Time.After(windowStart) {
		recs = recs[1:]
	}
	if len(recs) > 1 {
		p.wake(recs[1].Time.Add(downDelay))
	}
	next := cur
	switch {
	case rec > cur:
		next = rec
		st.Message = ""
	case rec < cur:
		if settle := p.st.LeaderSince.Add(downDelay); p.now.Before(settle) {
			p.wake(settle)
			st.Message = "not shrinking within downDelay of a new leader"
			break
		}
		most := 0
		for _, r := range recs {
			most = max(most, r.Replicas)
		}
		next = min(cur, most)
		st.Message = ""
	default:
		st.Message = ""
	}
	st.Replicas = next
	st.Recommendations = recs
	if old := sp.status.Autoscale; old == nil || old.Replicas != st.Replicas || old.Message != st.Message ||
		!slices.Equal(old.Recommendations, st.Recommendations) {
		sp.status.Autoscale = &st
	}
	return next
}

// usage is the newest report for a task from its own node within the
// window.
func (p *planner) usage(t *legion.Task) (legion.Usage, bool) {
	if p.usageIdx == nil {
		p.usageIdx = map[nsName]legion.Usage{}
		for _, u := range p.st.Usage {
			if p.now.Sub(u.Time) > UsageWindow || u.Time.After(p.now) {
				continue
			}
			k := nsName{u.Namespace, u.Task + "\x00" + u.Node}
			if old, ok := p.usageIdx[k]; !ok || u.Time.After(old.Time) {
				p.usageIdx[k] = u
			}
		}
	}
	u, ok := p.usageIdx[nsName{t.Metadata.Namespace, t.Metadata.Name + "\x00" + t.Spec.Node}]
	return u, ok
}
