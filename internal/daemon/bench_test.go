package daemon

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkApplyToReady100 measures the time from applying a service of
// 100 replicas on one node to all 100 tasks being ready: planning,
// status writes through Raft, 100 pods made by the process runtime and
// their readiness probes passing. Run it with -benchtime=1x.
//
// cpu-s is the CPU the benchmark's process (the node: store, dispatcher,
// controller, agent; and the benchmark's polling) and the children it
// reaped used meanwhile; the supervisors, still running, and the pods are
// not in it. On a loaded machine it moves less than the time.
func BenchmarkApplyToReady100(b *testing.B) {
	manifest := strings.Replace(webService, "replicas: 3", "replicas: 100", 1)
	manifest = strings.Replace(manifest, "name: web}", "name: many}", 1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		n := startNode(b)
		b.StartTimer()
		cpu0 := usedCPU()
		start := time.Now()
		n.apply(b, manifest)
		poll(b, "100 ready replicas", 10*time.Minute, func() bool {
			return readyTasks(n.tasksOf(b, "legion.service", "many")) == 100
		})
		b.ReportMetric(time.Since(start).Seconds(), "s-to-ready")
		b.ReportMetric((usedCPU() - cpu0).Seconds(), "cpu-s")
	}
}

// usedCPU is the CPU this process and the children it waited for used.
func usedCPU() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	var d time.Duration
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, children.Utime, children.Stime} {
		d += time.Duration(tv.Nano())
	}
	return d
}
