package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testimage"
)

// repoRoot is the module's directory (two up from this package).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The jailer embeds the runtime and the images and nothing of the
// cluster: no Raft, no gRPC, no bbolt, no CLI framework, no manager or
// agent package.
func TestJailerDependsOnNoServer(t *testing.T) {
	t.Parallel()
	deps := strings.Fields(goCmd(t, ".", nil, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."))
	if len(deps) < 5 {
		t.Fatalf("go list found %d dependencies", len(deps))
	}
	banned := []string{"github.com/hashicorp/raft", "google.golang.org/grpc", "go.etcd.io/bbolt", "github.com/spf13/cobra",
		"github.com/legionbsd/legion/cluster", "github.com/legionbsd/legion/internal/agent",
		"github.com/legionbsd/legion/internal/daemon", "github.com/legionbsd/legion/client"}
	for _, d := range deps {
		for _, b := range banned {
			if d == b || strings.HasPrefix(d, b+"/") {
				t.Errorf("the jailer depends on %s", d)
			}
		}
	}
}

// It builds for the FreeBSD hosts it is for.
func TestJailerBuildsForFreeBSD(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"amd64", "arm64"} {
		goCmd(t, ".", []string{"GOOS=freebsd", "GOARCH=" + arch}, "build", "-o", filepath.Join(t.TempDir(), "jailer"), ".")
	}
}

// It pulls an image from a registry and runs it once, with the image's
// entrypoint and the arguments given, passing on its output and exit
// code.
func TestJailerRunsAnImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process platform runs Linux images on Linux hosts")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := testimage.StartRegistry()
	t.Cleanup(reg.Close)
	img, err := testimage.Build(ctx, testimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref("hello", "1")
	if err := testimage.Push(ctx, img, ref); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "jailer")
	goCmd(t, ".", nil, "build", "-o", bin, ".")
	data := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "-data", data, "-platform", "process", ref, "--", "-say", "hello from a container", "-err", "to stderr", "-exit", "3")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("jailer: %v, want exit code 3\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stdout.String() != "hello from a container\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "to stderr\n") {
		t.Errorf("stderr %q", stderr.String())
	}
	// It removed its container: nothing of it is left running or recorded.
	left, _ := filepath.Glob(filepath.Join(data, "containers", "*"))
	if len(left) != 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// A module outside this one builds a program that constructs the jail
// runtime, ZFS, the image store on ZFS and the pf network on a fake
// system runner, and the jailer itself: everything it needs is public.
func TestOutsideModuleEmbedsTheNodePieces(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "outside.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/outside\n\ngo 1.26\n\nrequire github.com/legionbsd/legion v0.0.0\n\nreplace github.com/legionbsd/legion => " + root + "\n"
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod completes go.mod from the module cache; GOFLAGS from the
	// environment (such as -mod=vendor) must not apply to this module.
	env := []string{"GOFLAGS=-mod=mod", "GOWORK=off"}
	goCmd(t, dir, env, "build", "-o", filepath.Join(dir, "outside"), ".")
	goCmd(t, dir, append(env, "GOOS=freebsd", "GOARCH=amd64"), "build", "-o", filepath.Join(dir, "outside-freebsd"), ".")
	goCmd(t, dir, env, "build", "-o", filepath.Join(dir, "jailer"), "github.com/legionbsd/legion/examples/jailer")
	out, err := exec.Command(filepath.Join(dir, "outside")).CombinedOutput()
	if err != nil {
		t.Fatalf("the outside program: %v\n%s", err, out)
	}
	for _, want := range []string{"network: netbsd.Host, pf: *netbsd.PF", "pfctl"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the outside program printed no %q:\n%s", want, out)
		}
	}
}
