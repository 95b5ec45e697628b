package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/jail"
)

// fakeUsage is a runtime whose containers use what the test says.
type fakeUsage struct {
	jail.Runtime
	cs  []jail.ContainerStatus
	use map[string]jail.Usage
}

func (f *fakeUsage) List(context.Context, map[string]string) ([]jail.ContainerStatus, error) {
	return f.cs, nil
}
func (f *fakeUsage) Usage(_ context.Context, id string) (jail.Usage, error) { return f.use[id], nil }

func TestUsageSamplerRatesAndSums(t *testing.T) {
	t.Parallel()
	lbl := func(task string) map[string]string {
		return map[string]string{agent.LabelNode: "n1", agent.LabelNamespace: "shop", agent.LabelTaskName: task}
	}
	rt := &fakeUsage{
		cs: []jail.ContainerStatus{
			{ID: "t1", Infra: true, Labels: lbl("web-1-1"), State: jail.StateRunning},
			{ID: "t1-web", Labels: lbl("web-1-1"), State: jail.StateRunning},
			{ID: "t1-side", Labels: lbl("web-1-1"), State: jail.StateRunning},
			{ID: "t2-web", Labels: lbl("web-2-1"), State: jail.StateExited},
		},
		use: map[string]jail.Usage{"t1-web": {CPUTime: time.Second, MemoryBytes: 100 << 20}, "t1-side": {CPUTime: 0, MemoryBytes: 20 << 20}},
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := newUsageSampler(rt, "n1")
	s.now = func() time.Time { return now }
	if got := s.Usage(); len(got) != 0 {
		t.Fatalf("first sample reported %+v: a rate needs two", got)
	}
	now = now.Add(2 * time.Second)
	rt.use["t1-web"] = jail.Usage{CPUTime: 2 * time.Second, MemoryBytes: 120 << 20}        // 1 s of CPU in 2 s: 500m
	rt.use["t1-side"] = jail.Usage{CPUTime: 200 * time.Millisecond, MemoryBytes: 20 << 20} // 100m
	got := s.Usage()
	if len(got) != 1 {
		t.Fatalf("usage %+v, want the running task only", got)
	}
	u := got[0]
	if u.Task != "web-1-1" || u.Namespace != "shop" || u.Node != "n1" || u.CPU != 600 || u.Memory != legion.Bytes(140<<20) {
		t.Fatalf("usage %+v, want 600m and 140Mi for web-1-1", u)
	}
}
