package daemon

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkApplyToReady100 measures the time from applying a service of
// 100 replicas on one node to all 100 tasks being ready: planning,
// status writes through Raft, 100 pods made by the process runtime and
// their readiness probes passing. Run it with -benchtime=1x.
func BenchmarkApplyToReady100(b *testing.B) {
	manifest := strings.Replace(webService, "replicas: 3", "replicas: 100", 1)
	manifest = strings.Replace(manifest, "name: web}", "name: many}", 1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		n := startNode(b)
		b.StartTimer()
		start := time.Now()
		n.apply(b, manifest)
		poll(b, "100 ready replicas", 10*time.Minute, func() bool {
			return readyTasks(n.tasksOf(b, "legion.service", "many")) == 100
		})
		b.ReportMetric(time.Since(start).Seconds(), "s-to-ready")
	}
}
