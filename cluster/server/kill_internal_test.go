package server

import (
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testpoll"
)

// A killed manager is gone to the rest of the cluster from the kill on:
// Raft's transport is cut before the server waits for its background
// work to end, so a killed leader does not go on heartbeating its
// followers meanwhile.
func TestKillCutsRaftBeforeTheBackgroundWorkEnds(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	initCluster(t, m)
	tr := m.s.transport()
	// Background work that ends only when the test says.
	release := make(chan struct{})
	m.s.wg.Add(1)
	go func() {
		defer m.s.wg.Done()
		<-release
	}()
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		m.kill()
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		<-killed
	})
	testpoll.Until(t, "Raft's transport to close while the kill waits", 10*time.Second, 10*time.Millisecond, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.closed
	})
	select {
	case <-killed:
		t.Fatal("the kill ended before the background work it waits for")
	default:
	}
	close(release)
	<-killed
}
