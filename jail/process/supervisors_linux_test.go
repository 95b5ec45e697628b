package process_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
)

// The supervisors the runtime starts are this process's children: each is
// reaped once it ends (no zombie is left), by the one reaper whatever the
// number of containers.
func TestSupervisorsAreReapedWhenTheyEnd(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := process.New(process.Config{DataDir: t.TempDir(), Shim: exe, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Wait)
	jailtest.SupervisorsAreChildrenReaped(t, r)
}
