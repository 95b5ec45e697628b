package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// BenchmarkWrites measures applies per second through the API, with every
// log append and apply fsynced, for one and three managers, one client
// writing sequentially and 64 writing at once.
func BenchmarkWrites(b *testing.B) {
	for _, managers := range []int{1, 3} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("managers=%d/clients=%d", managers, clients), func(b *testing.B) {
				c := benchCluster(b, managers)
				ctx := context.Background()
				var n atomic.Int64
				b.ResetTimer()
				start := time.Now()
				if clients == 1 {
					for i := 0; i < b.N; i++ {
						if _, err := c.ApplyOne(ctx, configObj("default", fmt.Sprint("c", i), "x"), client.ApplyOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					var wg sync.WaitGroup
					for w := range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								i := n.Add(1)
								if i > int64(b.N) {
									return
								}
								if _, err := c.ApplyOne(ctx, configObj("default", fmt.Sprintf("c%d-%d", w, i), "x"), client.ApplyOptions{}); err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
			})
		}
	}
}

// benchCluster starts a cluster of one manager or three, stopped when
// the benchmark ends, and returns an admin client of its leader.
func benchCluster(b *testing.B, managers int) *client.Client {
	b.Helper()
	var ms []*manager
	if managers == 1 {
		ms = []*manager{newManager(b)}
		initCluster(b, ms[0])
	} else {
		ms, _ = threeManagers(b)
	}
	b.Cleanup(func() { stopAll(ms) })
	return adminClient(b, leaderOf(b, ms).addr, ms[0].dir)
}

// BenchmarkWatchDelivery measures how fast one manager delivers each
// write to 1000 open watches (over 10 connections).
func BenchmarkWatchDelivery(b *testing.B) {
	m := newManager(b)
	defer m.stop()
	initCluster(b, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watchers = 1000
	var conns []*client.Client
	for range 10 {
		c, err := client.New(client.Options{Server: m.addr, CredentialsFile: filepath.Join(m.dir, AdminFile)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	writer := conns[0]
	from := m.s.Store().AppliedIndex()
	var received atomic.Int64
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	for i := range watchers {
		w, err := conns[i%len(conns)].Watch(ctx, legion.KindConfig, client.ListOptions{}, from)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			ready.Done()
			for {
				if _, err := w.Next(); err != nil {
					return
				}
				received.Add(1)
			}
		}()
	}
	ready.Wait()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := writer.ApplyOne(ctx, configObj("default", fmt.Sprint("w", i), "x"), client.ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	want := int64(b.N) * watchers
	deadline := time.Now().Add(time.Minute)
	for received.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d events", received.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.ReportMetric(float64(want)/el.Seconds(), "events/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N)/1000, "ms/write-to-all")
	cancel()
	wg.Wait()
}

// BenchmarkApplyOfMany measures one apply of 50 objects (a stack's worth)
// through the API, with every log append fsynced, for one and three
// managers: the objects' writes share the log's appends, so an apply
// costs about one write's wait, not one per object.
func BenchmarkApplyOfMany(b *testing.B) {
	const objects = 50
	for _, managers := range []int{1, 3} {
		b.Run(fmt.Sprintf("managers=%d/objects=%d", managers, objects), func(b *testing.B) {
			c := benchCluster(b, managers)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				objs := make([]legion.Object, objects)
				for j := range objs {
					objs[j] = configObj("default", fmt.Sprintf("c%d-%d", i, j), "x")
				}
				res, err := c.Apply(ctx, objs, client.ApplyOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(res) != objects || res[objects-1].Outcome != client.Created {
					b.Fatalf("%d results, the last %+v", len(res), res[len(res)-1])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/apply")
		})
	}
}
