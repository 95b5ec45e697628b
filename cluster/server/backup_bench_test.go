package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/legionbsd/legion/cluster/store"
)

// countingDiscard counts what a backup writes.
type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkBackup streams the control state of 100,000 objects of about
// 512 bytes (sealed at rest) from the leader through the API, as
// legion backup does, and reports MB/s of the file.
func BenchmarkBackup(b *testing.B) {
	m := newManager(b)
	cl := initCluster(b, m)
	ctx := context.Background()
	const objects = 100_000
	writes := make([]store.Write, 0, 1000)
	for i := range objects {
		writes = append(writes, store.Write{Object: configObj("default", fmt.Sprint("c", i), strings.Repeat("x", 384))})
		if len(writes) == cap(writes) {
			for _, err := range m.s.Store().WriteAll(ctx, writes) {
				if err != nil {
					b.Fatal(err)
				}
			}
			writes = writes[:0]
		}
	}
	b.ResetTimer()
	var total int64
	for range b.N {
		w := &countingDiscard{}
		if err := cl.Backup(ctx, w); err != nil {
			b.Fatal(err)
		}
		total += w.n
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
	b.ReportMetric(float64(total)/float64(b.N)/1e6, "MB/backup")
}
