package main

import (
	"testing"

	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/daemon"
)

// --eviction-memory-available takes a byte quantity or off; zero and
// anything else are refused rather than read as the default.
func TestEvictionMemoryAvailableFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"200Mi": 200 << 20, "1G": 1e9, "off": agent.EvictionOff, "OFF": agent.EvictionOff} {
		var o daemon.Options
		if err := (evictionFlag{&o}).Set(in); err != nil || o.EvictionMemoryAvailable != want {
			t.Errorf("%q: %d %v, want %d", in, o.EvictionMemoryAvailable, err, want)
		}
	}
	for _, in := range []string{"0", "-5Mi", "lots", ""} {
		var o daemon.Options
		if err := (evictionFlag{&o}).Set(in); err == nil {
			t.Errorf("%q taken as %d, want it refused", in, o.EvictionMemoryAvailable)
		}
	}
	var o daemon.Options
	if got := (evictionFlag{&o}).String(); got != "100Mi" {
		t.Errorf("the default shows as %q, want 100Mi", got)
	}
}
