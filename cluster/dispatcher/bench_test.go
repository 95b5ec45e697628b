package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

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

// BenchmarkHeartbeat is one node's heartbeat over mutual TLS to the
// leader, as a call, with the usage of 80 tasks. Besides the time it
// reports the CPU per heartbeat (the client's share included, so an upper
// bound on the leader's) and what 256 nodes beating every period would
// cost the leader, in percent of one core.
func BenchmarkHeartbeat(b *testing.B) {
	benchmarkBeats(b, func(ctx context.Context, c legionpb.DispatcherClient) func(*legionpb.HeartbeatRequest) error {
		return func(req *legionpb.HeartbeatRequest) error {
			_, err := c.Heartbeat(ctx, req)
			return err
		}
	})
}

// BenchmarkHeartbeatStream is BenchmarkHeartbeat on the stream agents use
// (HeartbeatStream): the same beats, without a call's setup per beat.
func BenchmarkHeartbeatStream(b *testing.B) {
	benchmarkBeats(b, func(ctx context.Context, c legionpb.DispatcherClient) func(*legionpb.HeartbeatRequest) error {
		stream, err := c.HeartbeatStream(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return func(req *legionpb.HeartbeatRequest) error {
			if err := stream.Send(req); err != nil {
				return err
			}
			_, err := stream.Recv()
			return err
		}
	})
}

// benchmarkBeats measures the beats that open makes for a registered
// node.
func benchmarkBeats(b *testing.B, open func(context.Context, legionpb.DispatcherClient) func(*legionpb.HeartbeatRequest) error) {
	m := dispatchertest.Start(b)
	c := dialTLS(b, m.Addr, dispatchertest.Credentials(b, m.CA, "node-a", pki.RoleWorker).ClientConfig())
	data, err := json.Marshal(legion.NodeStatus{Hostname: "node-a", State: legion.NodeReady})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.Register(ctx, &legionpb.RegisterRequest{Status: data}); err != nil {
		b.Fatal(err)
	}
	req := &legionpb.HeartbeatRequest{}
	for i := range 80 {
		req.Usage = append(req.Usage, &legionpb.TaskUsage{Namespace: "web", Task: fmt.Sprintf("web-%d-1", i), CpuMillis: 120, MemoryBytes: 64 << 20})
	}
	beat := open(ctx, c)
	if err := beat(req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := processCPU()
	for range b.N {
		if err := beat(req); err != nil {
			b.Fatal(err)
		}
	}
	perBeat := (processCPU() - c0) / time.Duration(b.N)
	b.ReportMetric(float64(perBeat.Microseconds()), "cpu-µs/beat")
	const nodes = 256
	perSecond := float64(nodes) / legion.HeartbeatPeriod.Seconds()
	b.ReportMetric(perSecond*perBeat.Seconds()*100, "%core@256nodes")
}

// processCPU is the process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
