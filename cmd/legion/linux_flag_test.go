package main

import (
	"testing"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/spf13/pflag"
)

// --linux reaches the node's options wherever the platform flags are
// taken (daemon, up, the image commands), off unless given.
func TestLinuxFlagSetsTheNodeOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--linux"}, true}} {
		var o daemon.Options
		fs := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
		platformFlags(fs, &o)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if o.Linux != tc.want {
			t.Errorf("%q: Options.Linux %v, want %v", tc.args, o.Linux, tc.want)
		}
	}
	if cmd, _, err := newRootCommand().Find([]string{"daemon"}); err != nil || cmd.Flags().Lookup("linux") == nil {
		t.Error("legion daemon has no --linux")
	}
}
