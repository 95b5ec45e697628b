package procstat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
		ok         bool
	}{
		{"plain", "4242 (server) S 1 4242 4242 0 -1 4194560 120 0 0 0 7 3 0 0 20 0 5 0 100 1000000 321 18446744073709551615",
			Stat{Parent: 1, Session: 4242, Utime: 7, Stime: 3, RSS: 321}, true},
		// A command name may hold spaces and parentheses.
		{"odd name", "77 (a) b (c) Z 1 77 70 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 100 0 9 0",
			Stat{Zombie: true, Parent: 1, Session: 70, Utime: 1, Stime: 2, RSS: 9}, true},
		{"short", "1 (x) S 0 1", Stat{}, false},
		{"garbage", "no parenthesis here", Stat{}, false},
		{"not a number", "77 (x) S 1 77 77 0 -1 0 0 0 0 0 one 1 0 0 20 0 1 0 9 0 0 0", Stat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.line)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if tc.ok && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := (Stat{Utime: 731, Stime: 268}).CPU(); got != 9990*time.Millisecond {
		t.Fatalf("999 ticks of CPU: %v, want 9.99s", got)
	}
}

// This process's time grows as it works and is counted once per pid
// given; a process that is not there is unknown rather than idle.
func TestCPUTime(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no Linux /proc on this host")
	}
	before, ok := CPUTime(os.Getpid())
	if !ok {
		t.Fatal("no CPU time for this process")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, ok := CPUTime(os.Getpid(), os.Getpid())
		if !ok {
			t.Fatal("no CPU time for this process")
		}
		if after >= 2*before+10*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v (twice %v)", after, before)
		}
		for range 1_000_000 {
			runtime.Gosched()
		}
	}
	if _, ok := CPUTime(os.Getpid(), 1<<30); ok {
		t.Fatal("a process that does not exist was counted")
	}
}
