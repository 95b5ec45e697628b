package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// legion exec on a real one-node daemon: the command runs in the
// service's container, its output comes back apart, and legion exits
// with its exit code.
func TestExecOnADaemon(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("shell", ""))
	waitTaskOf(ctx, t, n, "shell", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskRunning })
	var err error
	var out, errOut *syncBuffer
	waitFor(t, "legion exec to reach the node's agent", func() bool {
		out, errOut = &syncBuffer{}, &syncBuffer{}
		root := rootWith(out, errOut, "exec", "shell", "--server", n.API, "--credentials", n.Admin, "--",
			"/app/server", "-say", "from inside", "-err", "to stderr", "-exit", "4")
		err = root.ExecuteContext(ctx)
		return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
	})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 4 {
		t.Fatalf("legion exec: %v, want the command's exit code 4", err)
	}
	if got := out.String(); got != "from inside\n" {
		t.Errorf("stdout %q", got)
	}
	if got := errOut.String(); got != "to stderr\n" {
		t.Errorf("stderr %q", got)
	}
	// The process runtime offers no terminal, and says so.
	root := rootWith(&syncBuffer{}, &syncBuffer{}, "exec", "-t", "shell", "--server", n.API, "--credentials", n.Admin, "--", "/app/server", "-exit", "0")
	if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "terminal is not offered by the process runtime") {
		t.Errorf("exec -t on the process runtime: %v", err)
	}
	// A command the image lacks is named, with the container, and no
	// runtime id or internal mark.
	root = rootWith(&syncBuffer{}, &syncBuffer{}, "exec", "shell", "--server", n.API, "--credentials", n.Admin, "--", "/bin/no-such-shell")
	if err := root.ExecuteContext(ctx); err == nil ||
		!strings.Contains(err.Error(), "container app of task default/shell-1-1: fork/exec /bin/no-such-shell: no such file or directory") ||
		strings.Contains(err.Error(), "permanent failure") {
		t.Errorf("exec of a missing command: %v", err)
	}
	root = rootWith(&syncBuffer{}, &syncBuffer{}, "exec", "shell", "--server", n.API, "--credentials", n.Admin, "/app/server")
	if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "put -- between") {
		t.Errorf("exec without --: %v", err)
	}
}
