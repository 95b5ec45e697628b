package process_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
	// The test binary is also the supervisor: the runtime runs it as
	// `<test binary> process-shim ...`, as it runs `legion process-shim ...`.
	_ "github.com/legionbsd/legion/jail/shim"
)

// With LEGION_TEST_DAEMON set to a data directory it plays a daemon
// instead: it starts container "survivor" there, says so, and waits to be
// killed.
func TestMain(m *testing.M) {
	jailtest.RefuseSupervisor()
	if dir := os.Getenv("LEGION_TEST_DAEMON"); dir != "" {
		os.Exit(playDaemon(dir))
	}
	os.Exit(m.Run())
}

func playDaemon(dir string) int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	r, err := process.New(process.Config{DataDir: dir, Shim: exe})
	if err != nil {
		return 1
	}
	ctx := context.Background()
	sp := shellSpec("survivor", "echo ready; sleep 600 & wait")
	if err := r.Create(ctx, sp); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := r.Start(ctx, "survivor"); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("started")
	select {} // until killed
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
