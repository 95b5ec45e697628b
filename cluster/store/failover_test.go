package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// scaledTiming is the production timing at a tenth of its durations.
func scaledTiming() Timing {
	d := DefaultTiming()
	return Timing{
		HeartbeatTimeout:   d.HeartbeatTimeout / 10,
		ElectionTimeout:    d.ElectionTimeout / 10,
		LeaderLeaseTimeout: d.LeaderLeaseTimeout / 10,
		ElectionJitter:     d.ElectionJitter / 10,
		StandTimeout:       d.StandTimeout / 10,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotThreshold:  1 << 30,
		SnapshotInterval:   time.Hour,
		TrailingLogs:       10,
	}
}

// At the production timing scaled down tenfold, every failover of three
// replicas should take 5 to 10 (tenths of) seconds: standWatch makes a
// replica stand soon after the silence passes the heartbeat timeout, and
// a turned-away candidate ask again soon (raft alone took up to 15). It
// is a benchmark, as a time is what it checks, which a loaded machine
// stretches; one kill an iteration:
//
//	go test -run XXX -bench BenchmarkFailoverScaled -benchtime 20x ./cluster/store/
func BenchmarkFailoverScaled(b *testing.B) {
	t := b
	timing := scaledTiming()
	open := func(id, dir string) *node {
		n := openNodeTiming(t, id, dir, timing)
		return n
	}
	var ns []*node
	for i := range 3 {
		ns = append(ns, open(fmt.Sprint("m", i+1), t.TempDir()))
	}
	t.Cleanup(func() {
		for _, n := range ns {
			n.s.Close()
		}
	})
	connect := func() {
		for _, a := range ns {
			for _, b := range ns {
				if a != b {
					a.tr.Connect(b.tr.LocalAddr(), b.tr)
				}
			}
		}
	}
	connect()
	if err := ns[0].s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, ns[0].s.IsLeader)
	for _, n := range ns[1:] {
		if err := ns[0].s.Raft().AddVoter(raftID(n.id), raftAddr(n.id), 0, 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		old := leaderOf(t, ns)
		var rest []*node
		for _, n := range ns {
			if n != old {
				rest = append(rest, n)
			}
		}
		waitFor(t, "followers hearing the leader", 5*time.Second, func() bool {
			for _, n := range rest {
				if _, id := n.s.Leader(); id != old.id || time.Since(n.s.Raft().LastContact()) > timing.HeartbeatTimeout/5 {
					return false
				}
			}
			return true
		})
		start := time.Now()
		old.s.Close()
		for _, n := range rest {
			n.tr.Disconnect(old.tr.LocalAddr())
		}
		waitFor(t, "a new leader", 5*time.Second, func() bool {
			return rest[0].s.IsLeader() || rest[1].s.IsLeader()
		})
		took = append(took, time.Since(start))
		*old = *open(old.id, old.dir)
		connect()
	}
	b.StopTimer()
	slices.Sort(took)
	t.Logf("failovers: %v", took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	for _, d := range took {
		// Silence counts from the last heartbeat, up to a fifth of the
		// timeout before the kill.
		if d < timing.HeartbeatTimeout*8/10 || d > 2*timing.HeartbeatTimeout {
			t.Errorf("failover took %s, want %s to %s", d, timing.HeartbeatTimeout, 2*timing.HeartbeatTimeout)
		}
	}
}
