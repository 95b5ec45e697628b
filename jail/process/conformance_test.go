package process_test

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
)

// The test binary is also the supervisor: the runtime runs it as
// `<test binary> process-shim ...`, as it runs `legion process-shim ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == process.ShimCommand {
		os.Exit(process.ShimMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// newRuntime makes a runtime over dir whose supervisor is this binary.
func newRuntime(t *testing.T, dir string) *process.Runtime {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := process.New(process.Config{DataDir: dir, Shim: exe, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Wait)
	return r
}

// The suite runs real processes: /bin/sh from the host's own tree, the
// root of every container here (chrooted into "/" when run as root).
func TestConformance(t *testing.T) {
	jailtest.RunConformance(t, func(t *testing.T) jail.Runtime { return newRuntime(t, t.TempDir()) },
		jailtest.WithRoot(func(t *testing.T, id string) jail.Root { return jail.Root{Path: "/"} }),
		jailtest.WithTimeout(20*time.Second))
}
