package daemon

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
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
		// The store's events, not a list every few milliseconds: the
		// watching costs the node next to nothing.
		w, err := n.st.Watch(0)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := usedCPU()
		start := time.Now()
		n.apply(b, manifest)
		ready := map[string]bool{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		for len(ready) < 100 {
			e, err := w.Next(ctx)
			if err != nil {
				cancel()
				b.Fatalf("100 ready replicas: %d ready: %v", len(ready), err)
			}
			t, ok := e.Object.(*legion.Task)
			if !ok || t.Metadata.Labels["legion.service"] != "many" {
				continue
			}
			if e.Type != store.Deleted && readyTasks([]*legion.Task{t}) == 1 {
				ready[t.Metadata.Name] = true
			} else {
				delete(ready, t.Metadata.Name)
			}
		}
		cancel()
		elapsed := time.Since(start)
		// What the events said, read back.
		if got := readyTasks(n.tasksOf(b, "legion.service", "many")); got < 100 {
			b.Fatalf("events said 100 ready replicas; the store has %d", got)
		}
		b.ReportMetric(elapsed.Seconds(), "s-to-ready")
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
