package store

import "time"

// FastTiming is the Raft timing for tests and single-host labs: elections
// within about a second, so a test that kills a leader sees the next one
// quickly, and a lease long enough that a leader on a loaded two-core
// machine (tests run in parallel, under -race too) does not step down
// between heartbeats. Every test cluster uses this one value, so a change
// to how fast tests elect is made here. Production uses DefaultTiming.
func FastTiming() Timing {
	return Timing{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 400 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotThreshold:  1 << 20,
		SnapshotInterval:   time.Hour,
		TrailingLogs:       100,
	}
}

// SteadyTiming is FastTiming with a 1.5 s lease and election timeouts,
// for tests whose subject is not an election but which load a leader of
// three with one follower down (many writes, a snapshot to send): on a
// loaded machine the 400 ms lease runs out there, the leader steps down
// and the write fails as it should, which is not what those tests test.
func SteadyTiming() Timing {
	t := FastTiming()
	t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout = 1500*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond
	return t
}
