// Package leakcheck is the goroutine-leak check the packages that run a
// store in their tests share as their TestMain.
//
// It is for tests only.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// raftWaiter is the goroutine a store leaves waiting on a Raft future for
// a moment after it closes: raft never answers a future queued while it
// shuts down (its ShutdownCh is left unset), so the store's waiter on such
// a write stays. It belongs to the store, not to the code under test.
const raftWaiter = "github.com/hashicorp/raft.(*deferError).Error"

// Main runs the package's tests and fails the run if goroutines other
// than the store's Raft waiter, or those extra ignores, outlive them.
func Main(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, append([]goleak.Option{goleak.IgnoreTopFunction(raftWaiter)}, extra...)...)
}
