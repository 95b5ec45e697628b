package scheduler_test

import (
	"strconv"
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
	if placed != services*100 {
		b.Fatalf("placed %d of %d", placed, services*100)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(placed), "ns/task")
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
func BenchmarkPlace2000(b *testing.B)     { benchPlace(b, 20) }
func BenchmarkNoChange20000(b *testing.B) { benchNoChange(b, 200) }
func BenchmarkNoChange2000(b *testing.B)  { benchNoChange(b, 20) }
