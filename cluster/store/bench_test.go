package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	benchPuts(b, n.s, 1)
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
	benchPuts(b, ns[0].s, 1)
}

// BenchmarkPutConcurrent is 64 writers at once on one and on three
// managers: raft batches their entries into shared appends.
func BenchmarkPutConcurrent(b *testing.B) {
	b.Run("managers=1", func(b *testing.B) {
		n := openNode(b, "m1", b.TempDir())
		defer n.s.Close()
		if err := n.s.Bootstrap("m1"); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "leader", 5*time.Second, n.s.IsLeader)
		benchPuts(b, n.s, 64)
	})
	b.Run("managers=3", func(b *testing.B) {
		ns := threeNodes(b)
		defer func() {
			for _, n := range ns {
				n.s.Close()
			}
		}()
		benchPuts(b, ns[0].s, 64)
	})
}

// benchPuts makes b.N writes of new objects from the given number of
// writers and reports writes per second.
func benchPuts(b *testing.B, s *Store, writers int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, _, err := s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
