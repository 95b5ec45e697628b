package process

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
