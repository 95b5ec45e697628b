package process

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       procStat
		ok         bool
	}{
		{"plain", "4242 (server) S 1 4242 4242 0 -1 4194560 120 0 0 0 7 3 0 0 20 0 5 0 100 1000000 321 18446744073709551615",
			procStat{session: 4242, utime: 7, stime: 3, rss: 321}, true},
		// A command name may hold spaces and parentheses.
		{"odd name", "77 (a) b (c) Z 1 77 70 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 100 0 9 0",
			procStat{zombie: true, session: 70, utime: 1, stime: 2, rss: 9}, true},
		{"short", "1 (x) S 0 1", procStat{}, false},
		{"garbage", "no parenthesis here", procStat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStat(tc.line)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(procStat{})); tc.ok && d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

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
