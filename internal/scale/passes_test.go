package scale

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/legionbsd/legion/cluster/metrics"
)

// The passes are summed over the managers' registries, a phase's are the
// difference of two readings, and the longest is the bucket every pass
// of the phase stayed within.
func TestPassesAreSummedOverManagersAndPhases(t *testing.T) {
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var cs []*metrics.Controller
	for _, reg := range regs {
		c, err := metrics.NewController(reg)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	cs[0].Passed(metrics.Pass{Read: time.Millisecond, Plan: 3 * time.Millisecond, Write: 4 * time.Millisecond, Applied: 9})
	before, err := readPasses(regs)
	if err != nil {
		t.Fatal(err)
	}
	if before.Count != 1 || before.Applied != 9 || before.Longest() != 0.01 {
		t.Fatalf("first reading: %d passes, %d applied, the longest within %g s; want 1, 9, 0.01", before.Count, before.Applied, before.Longest())
	}
	// The leader changed: the next passes are the other manager's.
	cs[0].Passed(metrics.Pass{Plan: 200 * time.Millisecond, Write: 1800 * time.Millisecond, Applied: 5, Conflicts: 1})
	cs[1].Passed(metrics.Pass{Read: 10 * time.Millisecond, Plan: 100 * time.Millisecond, Write: 90 * time.Millisecond, Applied: 3})
	after, err := readPasses(regs)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.Count != 2 || d.Applied != 8 || d.Conflicts != 1 {
		t.Fatalf("since the first reading: %d passes, %d applied, %d refused; want 2, 8, 1", d.Count, d.Applied, d.Conflicts)
	}
	if d.Total != 2200*time.Millisecond || d.Plan != 300*time.Millisecond || d.Write != 1890*time.Millisecond || d.Read != 10*time.Millisecond {
		t.Fatalf("since the first reading: total %s, read %s, plan %s, write %s; want 2.2s, 10ms, 300ms, 1.89s", d.Total, d.Read, d.Plan, d.Write)
	}
	if d.Longest() != 2.5 {
		t.Errorf("the longest within %g s, want 2.5 (a pass of 2 s)", d.Longest())
	}
	if s := d.String(); !strings.Contains(s, "2 planning passes, 1.1s each on average (read 5ms, plan 150ms, write 945ms), the longest within 2.5s") {
		t.Errorf("report: %s", s)
	}
	cs[1].Passed(metrics.Pass{Write: time.Minute})
	last, err := readPasses(regs)
	if err != nil {
		t.Fatal(err)
	}
	if s := last.Sub(after).String(); !strings.Contains(s, "the longest over 30s") {
		t.Errorf("a pass past the last bucket: %s", s)
	}
}
