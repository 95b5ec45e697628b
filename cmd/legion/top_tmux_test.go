package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testpoll"
)

// legion top on a real one-node cluster, run inside tmux: capture-pane
// after keystrokes shows the tabs switching, the filter narrowing the
// rows and the selected task's log in a pane; killing the session (the
// terminal hanging up) ends it.
func TestTopInteractiveUnderTmux(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/test installs it from .ci/packages)")
	}
	n, _ := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 1
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "hello from the top test", -listen, "$(LEGION_POD_IP):8080"]
`)
	// This test's binary runs legion top (TestMain), sparing a build.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A tmux server of this test's own, gone with it, its socket in the
	// test's directory (-L would leave one in /tmp/tmux-<uid>).
	sock := filepath.Join(t.TempDir(), "tmux")
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tmux("kill-server") })
	command := fmt.Sprintf("exec env NO_COLOR=1 %s=%s %s top --server %s --credentials %s", envConfig, noConfig, bin, n.API, n.Admin)
	if out, err := tmux("new-session", "-d", "-s", "top", "-x", "160", "-y", "48", command); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	screen := ""
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the screen last showed:\n%s", screen)
		}
	})
	sees := func(what string, want ...string) {
		t.Helper()
		testpoll.Until(t, what, 30*time.Second, 100*time.Millisecond, func() bool {
			out, err := tmux("capture-pane", "-p", "-t", "top")
			if err != nil {
				return false
			}
			screen = out
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		})
	}
	keys := func(k ...string) {
		t.Helper()
		if out, err := tmux(append([]string{"send-keys", "-t", "top"}, k...)...); err != nil {
			t.Fatalf("tmux send-keys %v: %v\n%s", k, err, out)
		}
	}
	sees("the nodes tab with the node ready", "legion top", "[1 nodes]", "ready", "CPU", "MEMORY")
	keys("2")
	sees("the workloads tab with the service", "[2 workloads]", "service", "web", "1/1")
	keys("Right")
	sees("the tasks tab with the running task", "[3 tasks]", "web-1", "running")
	keys("7")
	sees("the events tab", "[7 events]")
	keys("3", "/", "w", "e", "b", "-", "1", "Enter")
	sees("the tasks filtered", "[3 tasks]", "/web-1", "web-1")
	keys("l")
	sees("the task's log in a pane", "logs default/web-1", "hello from the top test", "esc close pane")
	keys("Escape")
	testpoll.Until(t, "the pane to close", 30*time.Second, 100*time.Millisecond, func() bool {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		screen = out
		return err == nil && strings.Contains(out, "[3 tasks]") && !strings.Contains(out, "logs default/web-1")
	})
	// The terminal hanging up ends legion top.
	out, err := tmux("display-message", "-p", "-t", "top", "#{pane_pid}")
	if err != nil {
		t.Fatalf("tmux display-message: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("pane pid %q: %v", out, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // should it outlive its terminal
	if out, err := tmux("kill-session", "-t", "top"); err != nil {
		t.Fatalf("tmux kill-session: %v\n%s", err, out)
	}
	testpoll.Until(t, "legion top to end once its terminal hung up", 30*time.Second, 50*time.Millisecond, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}
