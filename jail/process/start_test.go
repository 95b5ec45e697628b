package process_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
)

// A run recorded by a start whose process ended before it launched a
// supervisor (a daemon killed mid-start) is over, not running for good
// with nothing behind it: while that start holds the run's start lock it
// is under way, and once the lock is let go of the next start runs the
// container again.
func TestAStartCutShortIsOverAndStartsAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r := newRuntime(t, t.TempDir())
	t.Cleanup(func() { r.Remove(context.Background(), "web") })
	if err := r.Create(ctx, shellSpec("web", "echo ran; sleep 600 & wait")); err != nil {
		t.Fatal(err)
	}
	// A first run, to have the boot it is recorded in; then the run as a
	// start leaves it once it has recorded the run and before the
	// supervisor recorded itself.
	if err := r.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	poll(t, "the first run's output", func() (bool, string) {
		got := logTexts(t, r, "web")
		return slices.Equal(got, []string{"stdout:ran"}), fmt.Sprint(got)
	})
	if err := r.Stop(ctx, "web", time.Second); err != nil {
		t.Fatal(err)
	}
	dir := r.Dir("web")
	var run jail.RunInfo
	if err := jail.ReadJSON(filepath.Join(dir, jail.RunFile), &run); err != nil {
		t.Fatal(err)
	}
	cut := jail.RunInfo{Boot: run.Boot, StartedAt: time.Now().UTC()}
	if err := jail.WriteJSON(filepath.Join(dir, jail.RunFile), cut); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, jail.ExitFile)); err != nil {
		t.Fatal(err)
	}

	// The start still under way (its process holds the lock, once the
	// first run's supervisor, ending after its exit record, let go of it).
	recs := jail.Records{Dir: filepath.Dir(dir)}
	var lock *os.File
	poll(t, "the start lock", func() (bool, string) {
		var err error
		lock, err = recs.LockStart("web")
		return err == nil, fmt.Sprint(err)
	})
	if st, err := r.Inspect(ctx, "web"); err != nil || st.State != jail.StateRunning {
		lock.Close()
		t.Fatalf("with its start under way: %+v %v, want running", st, err)
	}
	lock.Close() // the starting process ends

	st, err := r.Inspect(ctx, "web")
	if err != nil || st.State != jail.StateExited || st.ExitCode != 255 || !strings.Contains(st.Message, "start was cut short") ||
		!st.FinishedAt.Equal(cut.StartedAt) {
		t.Fatalf("after its start was cut short: %+v %v, want exited (255) saying the start was cut short, at its start", st, err)
	}
	if err := r.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	st, err = r.Inspect(ctx, "web")
	if err != nil || st.State != jail.StateRunning || st.Pid <= 0 || !alive(st.Pid) {
		t.Fatalf("started again: %+v %v, want running with a live process", st, err)
	}
	poll(t, "the second run's output", func() (bool, string) {
		got := logTexts(t, r, "web")
		return slices.Equal(got, []string{"stdout:ran", "stdout:ran"}), fmt.Sprint(got)
	})
}

// The container's process inherits neither the supervisor's report pipe
// (descriptor 3) nor the run's start lock (4), which the supervisor keeps.
func TestContainerHoldsNoDescriptorOfItsSupervisor(t *testing.T) {
	t.Parallel()
	if !isLinuxProc() {
		t.Skip("reads the descriptors in /proc/PID/fd (Linux)")
	}
	ctx := testCtx(t)
	r := newRuntime(t, t.TempDir())
	t.Cleanup(func() { r.Remove(context.Background(), "fds") })
	script := `for fd in 3 4; do [ -e /proc/$$/fd/$fd ] && echo "holds $fd"; done; echo checked; sleep 600 & wait`
	if err := r.Create(ctx, shellSpec("fds", script)); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "fds"); err != nil {
		t.Fatal(err)
	}
	poll(t, "the container's check of its descriptors", func() (bool, string) {
		got := logTexts(t, r, "fds")
		return slices.Contains(got, "stdout:checked"), fmt.Sprint(got)
	})
	if got := logTexts(t, r, "fds"); !slices.Equal(got, []string{"stdout:checked"}) {
		t.Fatalf("the container's process: %q, want it to hold neither descriptor 3 nor 4", got)
	}
	// The supervisor, alive, still holds the run's start lock: a start of
	// the same container from elsewhere waits for it.
	if lock, err := (jail.Records{Dir: filepath.Dir(r.Dir("fds"))}).LockStart("fds"); err == nil {
		lock.Close()
		t.Fatal("the start lock of a running container was free: its supervisor should hold it")
	}
}
