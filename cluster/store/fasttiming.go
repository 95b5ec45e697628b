package store

import "time"

// FastTiming is the Raft timing for tests and single-host labs: elections
// within about a second, so a test that kills a leader sees the next one
// quickly. Every test cluster uses this one value, so a change to how
// fast tests elect is made here. Production uses DefaultTiming.
func FastTiming() Timing {
	return Timing{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotThreshold:  1 << 20,
		SnapshotInterval:   time.Hour,
		TrailingLogs:       100,
	}
}
