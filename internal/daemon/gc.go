package daemon

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target for a daemon's process
// (Go's GOGC; its default is 100). A manager allocates for every write
// it serves, and at 100 the collector took about a tenth of its CPU
// under load. At 200 (bench/run's store, 64 clients, pairs in turns):
// one manager +7.5 % writes/s and 9 % less CPU a write, three managers
// +5.5 % and 7 % less; the node's resident memory, manager and agent,
// went from 59 to 75 MB with 100 tasks and from 100 to 132 MB with 1,000
// (BenchmarkNodeMemory), the same idle (37 MB).
const GCPercent = 200

// SetGC sets the process's collector target to GCPercent unless GOGC is
// set, which the runtime has already followed. legion daemon and legion
// up call it first; so does the scale harness, whose managers and agents
// stand for daemons.
func SetGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
