package scale

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Passes is what the leaders' planning passes did, read from the
// managers' metrics (legion_controller_*) and summed over the managers:
// each counts only the passes it made while it led. Every change of the
// cluster waits for a pass, so their time is a run's critical path.
type Passes struct {
	Count int
	// Total, and each phase's, summed over the passes.
	Total, Read, Plan, Write time.Duration
	// le is how many passes took at most each bucket's bound, in seconds.
	le map[float64]uint64
	// Applied and Conflicts are the writes the passes planned that were
	// applied, and that a precondition refused.
	Applied, Conflicts int
}

// readPasses sums the planning passes' families of the registries.
func readPasses(regs []*prometheus.Registry) (Passes, error) {
	p := Passes{le: map[float64]uint64{}}
	for _, reg := range regs {
		fams, err := reg.Gather()
		if err != nil {
			return Passes{}, err
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				p.add(f.GetName(), m)
			}
		}
	}
	return p, nil
}

func (p *Passes) add(family string, m *dto.Metric) {
	label := func(name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	seconds := func(h *dto.Histogram) time.Duration {
		return time.Duration(math.Round(h.GetSampleSum() * float64(time.Second)))
	}
	switch family {
	case "legion_controller_pass_seconds":
		h := m.GetHistogram()
		p.Count += int(h.GetSampleCount())
		p.Total += seconds(h)
		for _, b := range h.GetBucket() {
			p.le[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	case "legion_controller_pass_phase_seconds":
		switch label("phase") {
		case "read":
			p.Read += seconds(m.GetHistogram())
		case "plan":
			p.Plan += seconds(m.GetHistogram())
		case "write":
			p.Write += seconds(m.GetHistogram())
		}
	case "legion_controller_writes_total":
		switch label("outcome") {
		case "applied":
			p.Applied += int(m.GetCounter().GetValue())
		case "conflict":
			p.Conflicts += int(m.GetCounter().GetValue())
		}
	}
}

// Sub is the passes since an earlier reading.
func (p Passes) Sub(b Passes) Passes {
	d := Passes{Count: p.Count - b.Count, Total: p.Total - b.Total, Read: p.Read - b.Read, Plan: p.Plan - b.Plan,
		Write: p.Write - b.Write, Applied: p.Applied - b.Applied, Conflicts: p.Conflicts - b.Conflicts, le: map[float64]uint64{}}
	for bound, n := range p.le {
		d.le[bound] = n - b.le[bound]
	}
	return d
}

// Longest is the smallest bucket bound that every pass stayed within
// (+Inf past the last bound; 0 without passes).
func (p Passes) Longest() float64 {
	if p.Count == 0 {
		return 0
	}
	longest := math.Inf(1)
	for bound, n := range p.le {
		if n >= uint64(p.Count) && bound < longest {
			longest = bound
		}
	}
	return longest
}

// String says it in a line of the report.
func (p Passes) String() string {
	if p.Count == 0 {
		return "no planning pass"
	}
	per := func(d time.Duration) string {
		return (d / time.Duration(p.Count)).Round(time.Millisecond).String()
	}
	longest := fmt.Sprintf("within %gs", p.Longest())
	if math.IsInf(p.Longest(), 1) {
		longest = fmt.Sprintf("over %gs", lastBound(p.le))
	}
	return fmt.Sprintf("%d planning passes, %s each on average (read %s, plan %s, write %s), the longest %s; writes applied %d, refused by a precondition %d",
		p.Count, per(p.Total), per(p.Read), per(p.Plan), per(p.Write), longest, p.Applied, p.Conflicts)
}

// lastBound is the largest bucket bound.
func lastBound(le map[float64]uint64) float64 {
	var last float64
	for bound := range le {
		last = max(last, bound)
	}
	return last
}
