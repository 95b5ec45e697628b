package main

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/daemon"
)

// legion daemon and legion up run the collector at daemon.GCPercent, and
// leave it as GOGC says when that is set. Not parallel: the target is
// the process's, and the parallel tests wait until this one is done.
func TestDaemonCommandsSetTheCollectorsTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// Each fails on its flags just after setting the target.
	commands := map[string]struct {
		args  []string
		fails string
	}{
		"daemon": {[]string{"daemon"}, "--data-dir is required"},
		"up":     {[]string{"up", "--pod-cidr", "not-a-range", "--data-dir", t.TempDir()}, "--pod-cidr"},
	}
	for name, c := range commands {
		for _, gogc := range []string{"", "150"} {
			t.Setenv("GOGC", gogc) // restored at the end
			if gogc == "" {
				os.Unsetenv("GOGC")
			}
			debug.SetGCPercent(100)
			if _, err := runLegion(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.fails) {
				t.Fatalf("%s with bad flags: %v, want an error naming %s", name, err, c.fails)
			}
			want := daemon.GCPercent
			if gogc != "" {
				want = 100 // as the runtime had it
			}
			if got := gcPercent(); got != want {
				t.Errorf("%s, GOGC %q: the collector's target is %d, want %d", name, gogc, got, want)
			}
		}
	}
}

// gcPercent is the collector's target as it stands.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
