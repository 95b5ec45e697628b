package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

// helloCopies holds each data directory's copy of the hello example, so
// an up started again on it publishes the same port.
var helloCopies sync.Map

// startUp runs the built legion binary's `up` on the hello example (on a
// free published port, one per data directory) and waits for both
// replicas to be ready.
func startUp(t *testing.T, bin, dataDir string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	hello, ok := helloCopies.Load(dataDir)
	if !ok {
		dir, _ := helloOnFreePort(t)
		hello, _ = helloCopies.LoadOrStore(dataDir, dir)
	}
	cmd := exec.Command(bin, "up", hello.(string), "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0")
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

// removeContainers removes every container of a node's data directory,
// with their roots (pods outlive a killed daemon, and a daemon restart
// adopts them).
func removeContainers(dataDir string) {
	// The pod network goes last, once nothing runs in it (a node keeps
	// it for the next daemon; nothing will come after a test's).
	defer daemon.RemovePodNetwork(context.Background(), dataDir)
	daemon.RemoveLeftContainers(context.Background(), dataDir, "/nonexistent")
}

// The daemon killed with SIGKILL and started again adopts the running
// pods: the same processes go on serving, none is restarted.
func TestUpKilledAndRestartedAdoptsItsPods(t *testing.T) {
	t.Parallel()
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
			removeContainers(dataDir)
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

// answersFromEveryReplica gets the example's published URL (as up printed
// it) until both replicas have answered.
func answersFromEveryReplica(t *testing.T, out *syncBuffer) {
	t.Helper()
	_, rest, ok := strings.Cut(out.String(), "published at ")
	url, _, _ := strings.Cut(rest, ";")
	if !ok || !strings.HasPrefix(url, "http://") {
		t.Fatalf("legion up printed no published address:\n%s", out.String())
	}
	seen := map[string]bool{}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	waitFor(t, "both replicas answering at "+url, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if name := strings.TrimSpace(string(body)); resp.StatusCode == 200 && strings.HasPrefix(name, "hello from hello-") {
			seen[strings.TrimPrefix(name, "hello from ")[:len("hello-1")]] = true
		}
		return len(seen) == 2
	})
}

// stopUp ends a legion up with sig and waits for it.
func stopUp(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("legion up did not stop on %v", sig)
	}
}

// legion up works every time: started again after Ctrl-C on its data
// directory (whose store still says the last run's tasks were running
// and ready), after kill -9, and on a fresh directory, the published port
// answers from every replica each time, and up never says ready before.
func TestUpServesAfterCtrlCKillAndOnAFreshDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "legion")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building legion: %v\n%s", err, out)
	}
	dataDir, fresh := filepath.Join(dir, "data"), filepath.Join(dir, "fresh")
	t.Cleanup(func() {
		removeContainers(dataDir)
		removeContainers(fresh)
	})
	up, out := startUp(t, bin, dataDir)
	answersFromEveryReplica(t, out)
	stopUp(t, up, syscall.SIGINT)

	up, out = startUp(t, bin, dataDir)
	answersFromEveryReplica(t, out)
	stopUp(t, up, syscall.SIGKILL)

	up, out = startUp(t, bin, dataDir)
	answersFromEveryReplica(t, out)
	stopUp(t, up, syscall.SIGINT)

	// restore names legion up's data directory as its user knows it, and
	// the cluster of one it leaves starts again with legion up.
	said, err := runLegion(t, "", "restore", "--data-dir", dataDir)
	if err != nil || !strings.Contains(said, "note: "+dataDir+" is legion up's data directory: restoring its manager, "+daemon.UpManagerDir(dataDir)+"\n") ||
		!strings.HasSuffix(said, "start it again with legion up --data-dir "+dataDir+"\n") {
		t.Fatalf("restore of legion up's data directory: %v\n%s", err, said)
	}
	up, out = startUp(t, bin, dataDir)
	answersFromEveryReplica(t, out)
	stopUp(t, up, syscall.SIGINT)

	up, out = startUp(t, bin, fresh)
	answersFromEveryReplica(t, out)
	stopUp(t, up, syscall.SIGINT)
}
