package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Controller is the leader's planning passes (cluster/controller): how
// long each took, in each of its phases, and what became of the writes
// it planned. A pass is the step every change of the cluster waits for
// (a rolling update moves one pass at a time), so its time is what an
// operator of a large cluster looks at first when changes come slowly.
type Controller struct {
	pass   prometheus.Histogram
	phases *prometheus.HistogramVec
	writes *prometheus.CounterVec
	// Each series, made once with the families (and so shown at zero
	// from the start: a rate over a counter that appears only with its
	// first write misses that write).
	read, plan, write                     prometheus.Observer
	applied, conflicts, failed, unchanged prometheus.Counter
}

// Pass is what one planning pass did: the time it spent reading its
// snapshot, planning and writing its plan, and its writes by outcome.
type Pass struct {
	Read, Plan, Write                     time.Duration
	Applied, Conflicts, Failed, Unchanged int
}

// passBuckets reach from a small cluster's few milliseconds to the
// seconds a pass over tens of thousands of tasks takes under load.
var passBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewController registers the planning passes' families on reg.
func NewController(reg prometheus.Registerer) (*Controller, error) {
	c := &Controller{
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "legion_controller_pass_seconds",
			Help:    "How long each planning pass of the leader took: reading its snapshot, planning and writing the plan.",
			Buckets: passBuckets,
		}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "legion_controller_pass_phase_seconds",
			Help:    "How long each phase of the leader's planning passes took: read (the snapshot), plan, write (until Raft applied the plan).",
			Buckets: passBuckets,
		}, []string{"phase"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legion_controller_writes_total",
			Help: "The writes the leader's planning passes planned, by outcome: applied, conflict (refused by a precondition; the next pass plans again), failed, unchanged (equal to what is stored, not written).",
		}, []string{"outcome"}),
	}
	for i, col := range c.collectors() {
		if err := reg.Register(col); err != nil {
			// Only those registered before it: a family of the same name
			// there already is another's.
			for _, done := range c.collectors()[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	c.read, c.plan, c.write = c.phases.WithLabelValues("read"), c.phases.WithLabelValues("plan"), c.phases.WithLabelValues("write")
	c.applied, c.conflicts = c.writes.WithLabelValues("applied"), c.writes.WithLabelValues("conflict")
	c.failed, c.unchanged = c.writes.WithLabelValues("failed"), c.writes.WithLabelValues("unchanged")
	return c, nil
}

func (c *Controller) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.pass, c.phases, c.writes}
}

// Unregister takes the families off reg again.
func (c *Controller) Unregister(reg prometheus.Registerer) {
	for _, col := range c.collectors() {
		reg.Unregister(col)
	}
}

// Passed counts one pass.
func (c *Controller) Passed(p Pass) {
	c.pass.Observe((p.Read + p.Plan + p.Write).Seconds())
	c.read.Observe(p.Read.Seconds())
	c.plan.Observe(p.Plan.Seconds())
	c.write.Observe(p.Write.Seconds())
	c.applied.Add(float64(p.Applied))
	c.conflicts.Add(float64(p.Conflicts))
	c.failed.Add(float64(p.Failed))
	c.unchanged.Add(float64(p.Unchanged))
}
