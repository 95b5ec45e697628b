package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Each pass is timed whole and by phase, and its writes are counted by
// outcome; every series is there, at zero, before the first pass.
func TestControllerCountsPasses(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c, err := NewController(reg)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range fams {
		series[f.GetName()] = len(f.GetMetric())
	}
	if series["legion_controller_pass_seconds"] != 1 || series["legion_controller_pass_phase_seconds"] != 3 || series["legion_controller_writes_total"] != 4 {
		t.Fatalf("series before the first pass: %v, want the pass, 3 phases and 4 outcomes", series)
	}
	c.Passed(Pass{Read: time.Millisecond, Plan: 20 * time.Millisecond, Write: 3 * time.Second, Applied: 5, Conflicts: 2, Unchanged: 7})
	c.Passed(Pass{Plan: time.Millisecond, Failed: 1})
	var m dtoMetric
	if got := m.count(t, c.pass); got != 2 {
		t.Errorf("%d passes timed, want 2", got)
	}
	if got := m.count(t, c.phases.WithLabelValues("write")); got != 2 {
		t.Errorf("%d write phases timed, want 2", got)
	}
	if got := sumOf(t, c.pass); got < 3.02 || got > 3.022 {
		t.Errorf("the passes took %v s in all, want 3.022", got)
	}
	if got := sumOf(t, c.phases.WithLabelValues("plan")); got < 0.0209 || got > 0.0211 {
		t.Errorf("planning took %v s in all, want 0.021", got)
	}
	for outcome, want := range map[string]float64{"applied": 5, "conflict": 2, "failed": 1, "unchanged": 7} {
		if got := counter(t, c.writes.WithLabelValues(outcome)); got != want {
			t.Errorf("%s writes = %v, want %v", outcome, got, want)
		}
	}
}

// A registry that holds one of the families already refuses them all,
// and keeps none of those registered before the refusal.
func TestControllerRegistersAllOrNone(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	taken := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "legion_controller_writes_total", Help: "another"}, []string{"outcome"})
	if err := reg.Register(taken); err != nil {
		t.Fatal(err)
	}
	taken.WithLabelValues("x").Inc()
	if _, err := NewController(reg); err == nil {
		t.Fatal("registered over a family of the same name")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	if len(names) != 1 || names[0] != "legion_controller_writes_total" {
		t.Fatalf("families after the refusal: %v, want only the one there before", names)
	}
}
