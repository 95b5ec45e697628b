package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

// startUp runs the built legion binary's `up` on the hello example and
// waits for both replicas to be ready.
func startUp(t *testing.T, bin, dataDir string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "up", "../../examples/hello", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0")
	var out syncBuffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), "service default/hello: 2 of 2 tasks ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("legion up did not get the example ready:\n%s", out.String())
	}
	return cmd, &out
}

func containers(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	rt, err := process.New(process.Config{DataDir: dataDir, Shim: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rt.List(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range cs {
		if !c.Infra && c.State == jail.StateRunning {
			out[c.ID] = c.Pid
		}
	}
	return out
}

// The daemon killed with SIGKILL and started again adopts the running
// pods: the same processes go on serving, none is restarted.
func TestUpKilledAndRestartedAdoptsItsPods(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "legion")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building legion: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	first, _ := startUp(t, bin, dataDir)
	before := containers(t, dataDir)
	if len(before) != 2 {
		t.Fatalf("%d running containers, want 2", len(before))
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if got := containers(t, dataDir); len(got) != 2 {
		t.Fatalf("after SIGKILL %d containers run, want the 2 pods to outlive the daemon", len(got))
	}
	second, out := startUp(t, bin, dataDir)
	defer func() {
		second.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- second.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			second.Process.Kill()
			t.Error("the second legion up did not stop on SIGTERM")
		}
		if left := containers(t, dataDir); len(left) != 0 {
			t.Errorf("%d containers left after legion up stopped", len(left))
			for id := range left {
				rt, _ := process.New(process.Config{DataDir: dataDir, Shim: "/nonexistent"})
				rt.Remove(context.Background(), id)
			}
		}
	}()
	after := containers(t, dataDir)
	for id, pid := range before {
		if after[id] != pid {
			t.Errorf("container %s: pid %d before, %d after: restarted instead of adopted\n%s", id, pid, after[id], out.String())
		}
	}
	if len(after) != 2 {
		t.Errorf("%d running containers after the restart, want the same 2", len(after))
	}
}
