package dispatcher_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// BenchmarkTaskChangeReachesStream is the time from writing one task of a
// node running n tasks (each with a Secret) to the node receiving its new
// set over mutual TLS: the store write, the set rebuilt from the replica
// and sent.
func BenchmarkTaskChangeReachesStream(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			m := dispatchertest.Start(b)
			ctx := context.Background()
			for i := range n {
				s := secret("web", fmt.Sprintf("s-%d", i), "value")
				if err := legion.Admit(s); err != nil {
					b.Fatal(err)
				}
				if _, _, err := m.Store.Put(ctx, s, store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
				if _, _, err := m.Store.Put(ctx, task("web", fmt.Sprintf("t-%d", i), "node-a", fmt.Sprintf("s-%d", i), "", ""), store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			c := dialTLS(b, m.Addr, dispatchertest.Credentials(b, m.CA, "node-a", pki.RoleWorker).ClientConfig())
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := c.Assignments(sctx, &legionpb.AssignmentsRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				tk := task("web", "t-0", "node-a", "s-0", "", "")
				tk.Spec.Slot = i + 1 // a change the set carries
				if _, _, err := m.Store.Put(ctx, tk, store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTaskChangeReachesStreamAmongVolumes is the same with n
// Volumes in the store, none of them the node's: what a task change costs
// the streams once the set carries Volumes.
func BenchmarkTaskChangeReachesStreamAmongVolumes(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("volumes=%d", n), func(b *testing.B) {
			m := dispatchertest.Start(b)
			ctx := context.Background()
			for i := range n {
				v := zfsVolume("shop", fmt.Sprintf("v-%d", i))
				v.Spec.Node = "node-b"
				if _, _, err := m.Store.Put(ctx, v, store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			if _, _, err := m.Store.Put(ctx, task("web", "t-0", "node-a", "", "", ""), store.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			c := dialTLS(b, m.Addr, dispatchertest.Credentials(b, m.CA, "node-a", pki.RoleWorker).ClientConfig())
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := c.Assignments(sctx, &legionpb.AssignmentsRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				tk := task("web", "t-0", "node-a", "", "", "")
				tk.Spec.Slot = i + 1
				if _, _, err := m.Store.Put(ctx, tk, store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
