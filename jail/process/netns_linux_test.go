package process_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testimage"
	"github.com/legionbsd/legion/jail"
)

// testNetNS makes a named network namespace for the test, or skips where
// this host cannot (not root, no ip(8), no namespaces).
func testNetNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip(8) from iproute2 is not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "legion-ptest-" + hex.EncodeToString(b)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("this host makes no network namespace: %v: %s", err, out)
	}
	return "/run/netns/" + name
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A container whose spec names a network namespace runs in it, and so
// does an exec into it: the exec reaches the container's server on the
// namespace's own loopback, which the host's does not share.
func TestContainerRunsInItsNetNS(t *testing.T) {
	t.Parallel()
	ns := testNetNS(t)
	// The namespace's loopback starts down, as a pod network's setup
	// finds it.
	if out, err := exec.Command("ip", "-n", filepath.Base(ns), "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "server")
	build, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testimage.BuildServer(build, bin, "", ""); err != nil {
		t.Fatal(err)
	}
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, t.TempDir())
	spec := jail.ContainerSpec{ID: "inns", Command: []string{"server", "-listen", "127.0.0.1:8080"},
		ImageEnv: []string{"PATH=/app", "NAME=in-the-namespace"}, WorkDir: "/app",
		Root: jail.Root{Path: serverRoot(t, server)}, StopGrace: time.Second, NetNS: ns}
	t.Cleanup(func() { r.Remove(context.Background(), "inns") })
	if err := r.Create(testCtx(t), spec); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(testCtx(t), "inns"); err != nil {
		t.Fatal(err)
	}
	st, err := r.Inspect(testCtx(t), "inns")
	if err != nil || st.State != jail.StateRunning {
		t.Fatalf("inspect: %+v %v", st, err)
	}
	if got, want := inode(t, "/proc/"+strconv.Itoa(st.Pid)+"/ns/net"), inode(t, ns); got != want {
		t.Fatalf("the container's network namespace is inode %d, want the pod's %d", got, want)
	}
	var out bytes.Buffer
	poll(t, "the server answering an exec in its namespace", func() (bool, string) {
		out.Reset()
		code, err := r.Exec(testCtx(t), "inns", jail.ExecSpec{Command: []string{"server", "-get", "http://127.0.0.1:8080/"}, Stdout: &out, Stderr: &out})
		return err == nil && code == 0 && strings.TrimSpace(out.String()) == "in-the-namespace", out.String()
	})
	// A relative path names no namespace.
	bad := spec
	bad.ID, bad.NetNS = "relative", "run/netns/x"
	if err := r.Create(testCtx(t), bad); err == nil || !strings.Contains(err.Error(), "netns") {
		t.Fatalf("a relative netns: %v, want refused naming netns", err)
	}
}
