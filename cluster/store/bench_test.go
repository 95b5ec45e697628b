package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPut is sequential fsynced writes on one manager, without the
// API in front.
func BenchmarkPut(b *testing.B) {
	n := openNode(b, "m1", b.TempDir())
	defer n.s.Close()
	if err := n.s.Bootstrap("m1"); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "leader", 5*time.Second, n.s.IsLeader)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := n.s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkPutThree is sequential fsynced writes on three managers over
// raft's in-memory transport (the API and gRPC left out).
func BenchmarkPutThree(b *testing.B) {
	ns := threeNodes(b)
	defer func() {
		for _, n := range ns {
			n.s.Close()
		}
	}()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := ns[0].s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
