package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/testcluster"
)

// BenchmarkWritesWhileScraped measures applies per second through one
// manager's API (64 clients at once) with metrics off, on but never
// scraped, and scraped every second and every 50 ms, to show what /metrics
// costs the API. Every scrape reads the whole store (the leader's cluster
// families), which grows with the writes.
func BenchmarkWritesWhileScraped(b *testing.B) {
	for _, bc := range []struct {
		name   string
		on     bool
		scrape time.Duration
	}{{"metrics=off", false, 0}, {"metrics=on/scrape=never", true, 0}, {"metrics=on/scrape=1s", true, time.Second},
		{"metrics=on/scrape=50ms", true, 50 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			var ms *MetricsServer
			if bc.on {
				var err error
				if ms, err = ServeMetrics("127.0.0.1:0", nil); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { ms.Close() })
			}
			c := testcluster.New(b, testcluster.Options{Configure: func(_ int, sc *server.Config) {
				if ms != nil {
					sc.Metrics = ms.Registry
				}
			}})
			cl := c.Client()
			ctx, stop := context.WithCancel(context.Background())
			var scrapes atomic.Int64
			var wg sync.WaitGroup
			if bc.scrape > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tk := time.NewTicker(bc.scrape)
					defer tk.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tk.C:
						}
						resp, err := http.Get("http://" + ms.Addr + "/metrics")
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						scrapes.Add(1)
					}
				}()
			}
			const clients = 64
			var n atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var writers sync.WaitGroup
			for w := range clients {
				writers.Add(1)
				go func() {
					defer writers.Done()
					for {
						i := n.Add(1)
						if i > int64(b.N) {
							return
						}
						o, _ := legion.New(legion.KindConfig)
						cfg := o.(*legion.Config)
						cfg.Metadata.Name, cfg.Metadata.Namespace, cfg.Spec.Text = fmt.Sprintf("c%d-%d", w, i), "default", "x"
						if _, err := cl.ApplyOne(ctx, cfg, client.ApplyOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			writers.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			stop()
			wg.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(float64(scrapes.Load()), "scrapes")
		})
	}
}
