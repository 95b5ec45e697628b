package store

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The only voter elects itself after the leader lease rather than the
// heartbeat timeout, after bootstrap and after a restart, then goes back
// to the normal timing.
func TestOnlyVoterElectsAfterTheLease(t *testing.T) {
	t.Parallel()
	timing := FastTiming()
	timing.HeartbeatTimeout, timing.ElectionTimeout, timing.LeaderLeaseTimeout = time.Minute, time.Minute, 100*time.Millisecond
	dir := t.TempDir()
	for round := range 2 {
		_, tr := raft.NewInmemTransport("m1")
		s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if err := s.Bootstrap("m1"); err != nil {
				t.Fatal(err)
			}
		}
		// Far sooner than the minute a heartbeat timeout would take.
		waitFor(t, "leader", 10*time.Second, s.IsLeader)
		waitFor(t, "normal timing back", 5*time.Second, func() bool {
			return s.raft.ReloadableConfig().HeartbeatTimeout == time.Minute
		})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
