// Package bench holds benchmarks that compare Legion with the tools
// people would use instead. It is its own module, so etcd's client stays
// out of the project's; bench/run starts those tools and runs these.
package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// valueSize is the bytes each write carries, to Legion and to etcd alike.
const valueSize = 512

// pacedRate is the write rate at which latency is measured (writes/s).
const pacedRate = 1000

// writer is one system under test: put writes key with value.
type writer interface {
	put(ctx context.Context, key, value string) error
}

type etcdWriter struct{ c *clientv3.Client }

func (w etcdWriter) put(ctx context.Context, key, value string) error {
	_, err := w.c.Put(ctx, key, value)
	return err
}

type legionWriter struct{ c *client.Client }

func (w legionWriter) put(ctx context.Context, key, value string) error {
	o, _ := legion.New(legion.KindConfig)
	cfg := o.(*legion.Config)
	cfg.Metadata.Name, cfg.Metadata.Namespace = key, legion.DefaultNamespace
	cfg.Spec.Text = value
	_, err := w.c.ApplyOne(ctx, cfg, client.ApplyOptions{})
	return err
}

// BenchmarkStore writes valueSize-byte values to Legion (through its API
// and Go client, as any client writes) and to etcd (through its Go
// client), with one and three members, from one client in sequence and
// from 64 at once; then 64 clients at pacedRate writes/s for latency.
// etcd's endpoints come from BENCH_ETCD1 and BENCH_ETCD3 (comma
// separated; bench/run starts both clusters); without them only Legion
// runs. Legion's managers are the daemons at BENCH_LEGION1 and
// BENCH_LEGION3 when set (see legionCluster). Every write is fsynced on a
// quorum by both.
//
//	BENCH_ETCD1=127.0.0.1:2379 go test -run '^$' -bench Store -benchtime 3000x
func BenchmarkStore(b *testing.B) {
	for _, members := range []int{1, 3} {
		systems := map[string]writer{}
		if eps := os.Getenv(fmt.Sprintf("BENCH_ETCD%d", members)); eps != "" {
			c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(eps, ","), DialTimeout: 10 * time.Second})
			if err != nil {
				b.Fatalf("etcd at %s: %v", eps, err)
			}
			b.Cleanup(func() { c.Close() })
			systems["etcd"] = etcdWriter{c}
		}
		systems["legion"] = legionCluster(b, members)
		for _, name := range []string{"legion", "etcd"} {
			w, ok := systems[name]
			if !ok {
				continue
			}
			for _, clients := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/members=%d/clients=%d", name, members, clients), func(b *testing.B) {
					run(b, w, clients, 0)
				})
			}
			b.Run(fmt.Sprintf("%s/members=%d/clients=64/rate=%d", name, members, pacedRate), func(b *testing.B) {
				run(b, w, 64, pacedRate)
			})
		}
	}
}

// legionCluster is a writer to Legion managers: those at BENCH_LEGIONn
// (daemons bench/run started, a process apart as etcd is, with the
// admin's credentials in BENCH_LEGIONn_CREDENTIALS), else members
// started in this process by internal/testcluster.
func legionCluster(b *testing.B, members int) writer {
	env := fmt.Sprintf("BENCH_LEGION%d", members)
	if addr := os.Getenv(env); addr != "" {
		c, err := client.New(client.Options{Server: addr, CredentialsFile: os.Getenv(env + "_CREDENTIALS"), Retry: 30 * time.Second})
		if err != nil {
			b.Fatalf("Legion at %s: %v", addr, err)
		}
		b.Cleanup(func() { c.Close() })
		return legionWriter{c}
	}
	tc := testcluster.New(b, testcluster.Options{Managers: members, Leader: true})
	tc.WaitLeader()
	return legionWriter{tc.Client()}
}

// runs numbers the runs of a benchmark body, so each writes new keys.
var runs atomic.Int64

// run makes b.N writes from clients writers, at most rate a second when
// rate is set, and reports writes/s and the 50th and 99th percentile
// latency of a write.
func run(b *testing.B, w writer, clients, rate int) {
	value := strings.Repeat("x", valueSize)
	prefix := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e6, runs.Add(1))
	ctx := context.Background()
	var pace <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		pace = t.C
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if pace != nil {
					<-pace
				}
				start := time.Now()
				if err := w.put(ctx, fmt.Sprintf("%s-%d", prefix, i), value); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
