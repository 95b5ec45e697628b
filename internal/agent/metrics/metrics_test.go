package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type fakeRuntime struct {
	cs  []jail.ContainerStatus
	use map[string]jail.Usage // missing: unreadable
}

func (f fakeRuntime) List(context.Context, map[string]string) ([]jail.ContainerStatus, error) {
	return f.cs, nil
}

func (f fakeRuntime) Usage(_ context.Context, id string) (jail.Usage, error) {
	u, ok := f.use[id]
	if !ok {
		return u, errors.New("racct is off")
	}
	return u, nil
}

func container(id, task, name string, infra bool, st jail.State) jail.ContainerStatus {
	return jail.ContainerStatus{ID: id, Infra: infra, State: st, Labels: map[string]string{
		labelNamespace: "shop", labelTask: task, labelTaskName: "web-1-1", labelContainer: name}}
}

// find is the value of family name's sample whose labels hold want, and
// how many samples matched.
func find(t *testing.T, fams []*dto.MetricFamily, name string, want map[string]string) (float64, int) {
	t.Helper()
	var v float64
	n := 0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			ok := true
			for _, l := range m.Label {
				if w, has := want[l.GetName()]; has && w != l.GetValue() {
					ok = false
				}
			}
			if ok {
				n++
				v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return v, n
}

// Running containers report usage beside their task's limits; one whose
// usage cannot be read counts as unread; pods, image layers (shared ones
// once) and sessions are reported.
func TestAgentCollector(t *testing.T) {
	t.Parallel()
	task := &legion.Task{}
	task.Metadata.UID = "uid1"
	task.Spec.Pod.Containers = []legion.Container{{Name: "app"}, {Name: "side"}}
	task.Spec.Pod.Containers[0].Resources.Limits = legion.ResourceLimits{CPU: 250, Memory: 64 << 20}
	rt := fakeRuntime{
		cs: []jail.ContainerStatus{container("pod", "uid1", "", true, jail.StateRunning), container("c1", "uid1", "app", false, jail.StateRunning),
			container("c2", "uid1", "side", false, jail.StateRunning), container("c3", "uid1", "old", false, jail.StateExited)},
		use: map[string]jail.Usage{"c1": {CPUTime: 1500 * time.Millisecond, MemoryBytes: 1 << 20, Processes: 2}},
	}
	layer := image.LayerRecord{Digest: "sha256:a", Size: 100}
	reg := prometheus.NewRegistry()
	err := Register(reg, Source{Node: "n1", Runtime: rt, Tasks: func() []*legion.Task { return []*legion.Task{task} },
		Images: func() ([]*image.Record, error) {
			return []*image.Record{{Layers: []image.LayerRecord{layer, {Digest: "sha256:b", Size: 7}}}, {Layers: []image.LayerRecord{layer}}}, nil
		},
		Sessions: func() (map[string]int, map[string]uint64) {
			return map[string]int{"logs": 1}, map[string]uint64{"logs": 4}
		}})
	if err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	app := map[string]string{"namespace": "shop", "container": "app"}
	for _, c := range []struct {
		name string
		want map[string]string
		v    float64
		n    int
	}{
		{"legion_container_cpu_seconds_total", app, 1.5, 1},
		{"legion_container_memory_bytes", app, 1 << 20, 1},
		{"legion_container_processes", app, 2, 1},
		{"legion_container_cpu_limit_cores", nil, 0.25, 1}, // side has no limit
		{"legion_container_memory_limit_bytes", app, 64 << 20, 1},
		{"legion_container_memory_bytes", map[string]string{"container": "side"}, 0, 0},
		{"legion_agent_usage_unread", nil, 1, 1},
		{"legion_agent_pods", map[string]string{"namespace": "shop"}, 1, 1},
		{"legion_agent_containers", map[string]string{"state": string(jail.StateRunning)}, 2, 1},
		{"legion_agent_images", nil, 2, 1},
		{"legion_agent_image_layer_bytes", nil, 107, 1},
		{"legion_agent_sessions", map[string]string{"kind": "logs"}, 1, 1},
		{"legion_agent_sessions_total", map[string]string{"kind": "logs"}, 4, 1},
	} {
		if v, n := find(t, fams, c.name, c.want); v != c.v || n != c.n {
			t.Errorf("%s%v = %v over %d samples, want %v over %d", c.name, c.want, v, n, c.v, c.n)
		}
	}
}

// The node's available memory, whether it is under the eviction
// threshold, and the evictions by reason are reported; nothing of the
// memory while it is unmeasured, and no pressure while eviction is off.
func TestAgentCollectorNodeMemory(t *testing.T) {
	t.Parallel()
	gather := func(avail, threshold int64, measured bool) []*dto.MetricFamily {
		t.Helper()
		reg := prometheus.NewRegistry()
		err := Register(reg, Source{Node: "n1", Runtime: fakeRuntime{},
			NodeMemory: func() (int64, int64, bool) { return avail, threshold, measured },
			Evictions: func() map[string]uint64 {
				return map[string]uint64{"no-memory-request": 2, "over-memory-request": 0}
			}})
		if err != nil {
			t.Fatal(err)
		}
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	for _, c := range []struct {
		what                 string
		avail, threshold     int64
		measured             bool
		availN, pressure, pN float64
	}{
		{"under the threshold", 80 << 20, 100 << 20, true, 1, 1, 1},
		{"above it", 2 << 30, 100 << 20, true, 1, 0, 1},
		{"eviction off", 80 << 20, -1, true, 1, 0, 0},
		{"unmeasured", 0, 100 << 20, false, 0, 0, 0},
	} {
		fams := gather(c.avail, c.threshold, c.measured)
		if v, n := find(t, fams, "legion_agent_memory_available_bytes", nil); float64(n) != c.availN || n == 1 && v != float64(c.avail) {
			t.Errorf("%s: legion_agent_memory_available_bytes = %v over %d samples, want %d over %v", c.what, v, n, c.avail, c.availN)
		}
		if v, n := find(t, fams, "legion_agent_memory_pressure", nil); v != c.pressure || float64(n) != c.pN {
			t.Errorf("%s: legion_agent_memory_pressure = %v over %d samples, want %v over %v", c.what, v, n, c.pressure, c.pN)
		}
		if v, n := find(t, fams, "legion_agent_evictions_total", map[string]string{"reason": "no-memory-request"}); v != 2 || n != 1 {
			t.Errorf("%s: evictions of tasks without a request = %v over %d samples, want 2 over 1", c.what, v, n)
		}
		if _, n := find(t, fams, "legion_agent_evictions_total", nil); n != 2 {
			t.Errorf("%s: legion_agent_evictions_total has %d samples, want one per reason (2)", c.what, n)
		}
	}
}
