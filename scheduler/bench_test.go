package scheduler_test

import (
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

// benchCluster is 256 nodes over four zones, half with SSDs, and services
// of 100 replicas each, every other one constrained to SSD nodes, all
// spread over zones.
func benchCluster(b *testing.B, services int) *schedtest.Cluster {
	c := schedtest.New(b)
	for i := 0; i < 256; i++ {
		disk := "hdd"
		if i%2 == 0 {
			disk = "ssd"
		}
		c.AddNode("node"+strconv.Itoa(i), schedtest.Resources("64", "256Gi"),
			schedtest.Labels("zone", "z"+strconv.Itoa(i%4), "disk", disk))
	}
	for i := 0; i < services; i++ {
		replicas := 100
		s := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
			Metadata: legion.Metadata{Name: "svc" + strconv.Itoa(i)}}}
		s.Spec.Replicas = &replicas
		s.Spec.Pod.Containers = []legion.Container{{Name: "c", Image: "img:" + strconv.Itoa(i),
			Resources: legion.Resources{Requests: legion.ResourceRequests{CPU: 100, Memory: 128 << 20}}}}
		s.Spec.Placement.Preferences = []legion.Preference{{Spread: "node.labels.zone"}}
		if i%2 == 0 {
			s.Spec.Placement.Constraints = []string{"node.labels.disk == ssd"}
		}
		if err := legion.Admit(s); err != nil {
			b.Fatal(err)
		}
		c.Store(s)
	}
	return c
}

// cpuTime is the process's user and system time: on a shared machine it
// says more than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchPlace(b *testing.B, services int) {
	c := benchCluster(b, services)
	st := c.State()
	var r scheduler.Result
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		r = scheduler.Plan(st, c.Now)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	placed := 0
	for _, t := range r.CreateTasks {
		if t.Spec.Placed != nil {
			placed++
		}
	}
	// A pass makes at most MaxCreatesPerPass tasks.
	if want := min(services*100, scheduler.MaxCreatesPerPass); placed != want {
		b.Fatalf("placed %d, want %d", placed, want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(placed), "ns/task")
}

// benchConverge is the passes that take an empty cluster to every task
// placed (the store's reads and writes between them left out).
func benchConverge(b *testing.B, services int) {
	b.ReportAllocs()
	passes := 0
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := benchCluster(b, services)
		for {
			st := c.State()
			b.StartTimer()
			cpu0 := cpuTime()
			r := scheduler.Plan(st, c.Now)
			cpu += cpuTime() - cpu0
			b.StopTimer()
			if len(r.CreateTasks) == 0 {
				break
			}
			passes++
			c.Write(r)
		}
		if n := len(c.Tasks); n != services*100 {
			b.Fatalf("%d tasks, want %d", n, services*100)
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
}

func benchNoChange(b *testing.B, services int) {
	c := benchCluster(b, services)
	c.Converge()
	st := c.State()
	if len(st.Tasks) != services*100 {
		b.Fatalf("%d tasks, want %d", len(st.Tasks), services*100)
	}
	if r := scheduler.Plan(st, c.Now); !r.Empty() {
		b.Fatalf("converged cluster writes: %s", schedtest.Describe(r))
	}
	// Fresh copies in list order, as the loop reads them from the store
	// each pass (the harness's tasks lie wherever the steps made them),
	// and no garbage of the setup left to collect.
	for i, t := range st.Tasks {
		st.Tasks[i] = legion.Clone(t).(*legion.Task)
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		scheduler.Plan(st, c.Now)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(st.Tasks)), "ns/task")
}

func BenchmarkPlace20000(b *testing.B)    { benchPlace(b, 200) }
func BenchmarkConverge20000(b *testing.B) { benchConverge(b, 200) }
func BenchmarkPlace2000(b *testing.B)     { benchPlace(b, 20) }
func BenchmarkNoChange20000(b *testing.B) { benchNoChange(b, 200) }
func BenchmarkNoChange2000(b *testing.B)  { benchNoChange(b, 20) }

// BenchmarkRollout20000 is the scale run's second rolling update as the
// planner sees it: 200 services of 100 replicas, 25 at a time each
// (stop-first), over a store that already holds one rollout's history
// (40,000 tasks at the start, 60,000 at the end). The agents act on each
// pass's writes at once. It reports the passes the rollout takes and the
// planner's CPU for all of them: a pass's cost grows with the tasks held,
// so the fewer passes a rollout takes, the less it spends planning.
func BenchmarkRollout20000(b *testing.B) {
	b.ReportAllocs()
	passes, created := 0, 0
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := benchCluster(b, 200)
		c.Converge()
		rollout(b, c, "v2", false) // the history one rollout leaves
		p, n, d := rollout(b, c, "v3", true)
		passes, created, cpu = passes+p, created+n, cpu+d
	}
	b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(created)/1e3, "cpu-us/task")
}

// rollout changes every service's image to tag and passes until nothing
// changes; it returns the passes, the tasks made and the planner's CPU.
// When timed, the benchmark's clock runs during the plans alone.
func rollout(b *testing.B, c *schedtest.Cluster, tag string, timed bool) (passes, created int, cpu time.Duration) {
	par, monitor := 25, legion.Duration(0)
	for _, s := range c.Services {
		s = legion.Clone(s).(*legion.Service)
		s.Spec.Pod.Containers[0].Image += "-" + tag
		s.Spec.Update = legion.UpdateConfig{Parallelism: &par, Monitor: &monitor}
		if err := legion.Admit(s); err != nil {
			b.Fatal(err)
		}
		c.Store(s)
	}
	for passes < 1000 {
		st := c.State()
		if timed {
			b.StartTimer()
		}
		cpu0 := cpuTime()
		r := scheduler.Plan(st, c.Now)
		cpu += cpuTime() - cpu0
		b.StopTimer()
		c.Heartbeat()
		c.Write(r)
		acted := c.Agents()
		if r.Empty() && !acted {
			break
		}
		passes++
		created += len(r.CreateTasks)
	}
	running := 0
	for _, t := range c.Tasks {
		if t.Status.State == legion.TaskRunning && strings.HasSuffix(t.Spec.Pod.Containers[0].Image, "-"+tag) {
			running++
		}
	}
	if running != 200*100 || created != 200*100 {
		b.Fatalf("after %d passes: %d tasks running at %s, %d made; want 20000 of each", passes, running, tag, created)
	}
	return passes, created, cpu
}
