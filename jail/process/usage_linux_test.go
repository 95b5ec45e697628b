package process

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The containers' usage read at one heartbeat comes from one pass over
// /proc, not one per container; the pass finds this process in its own
// session.
func TestSessionUsageReadsProcOncePerSample(t *testing.T) {
	scans := 0
	tab := &sessionTable{scan: func() (map[int][]procEntry, bool) { scans++; return scanSessions() }}
	sid, err := unix.Getsid(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		u, ok := tab.usage(sid)
		if !ok || u.Processes < 1 || u.MemoryBytes <= 0 || u.OpenFiles < 1 {
			t.Fatalf("usage of this test's session %d: %+v %v, want this process in it", sid, u, ok)
		}
	}
	if scans != 1 {
		t.Fatalf("%d passes over /proc for 50 reads, want 1", scans)
	}
	if _, ok := tab.usage(-1); !ok {
		t.Fatal("a session with no process: not ok, want ok with nothing counted")
	}
}
