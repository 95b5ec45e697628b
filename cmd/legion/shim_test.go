package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail/process"
)

// Packages the CLI and the daemon initialize that a supervisor never uses:
// the heaviest of them (compose's JSON schemas alone took 11 ms a start).
var notSupervisorPackages = []string{
	"github.com/santhosh-tekuri/jsonschema/v6",
	"github.com/legionbsd/legion/internal/proto",
	"google.golang.org/grpc",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/charmbracelet/bubbletea",
	"github.com/spf13/cobra",
}

// initialized runs this binary with args and GODEBUG=inittrace=1 and
// returns the packages whose initializers ran, its standard error and its
// exit code.
func initialized(t *testing.T, args ...string) (map[string]bool, string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %q: %v", exe, args, err)
	}
	pkgs := map[string]bool{}
	var other []string
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init <package> @<since start> ms, <clock> ms clock, ...
		if f := strings.Fields(sc.Text()); len(f) > 2 && f[0] == "init" && strings.HasPrefix(f[2], "@") {
			pkgs[f[1]] = true
			continue
		}
		other = append(other, sc.Text())
	}
	return pkgs, strings.Join(other, "\n"), code
}

// A supervisor runs from package shim's initializer, before the packages
// only the CLI and the daemon use have initialized: every container start
// pays for what it initializes.
func TestSupervisorRunsBeforeTheCLIsPackagesInitialize(t *testing.T) {
	// The test binary without a test to run initializes everything.
	whole, _, code := initialized(t, "-test.run=^$")
	if code != 0 {
		t.Fatalf("the test binary with no test to run exited %d", code)
	}
	// The supervisor's usage error: it ran, from its initializer, and
	// exited.
	shim, stderr, code := initialized(t, process.ShimCommand)
	if code != 2 || !strings.Contains(stderr, "usage: legion process-shim supervise DIR") {
		t.Fatalf("legion process-shim without arguments: exit %d, stderr %q; want 2 and its usage", code, stderr)
	}
	if !shim["github.com/legionbsd/legion/jail"] {
		t.Errorf("package jail had not initialized when the supervisor ran: %d packages had", len(shim))
	}
	for _, p := range notSupervisorPackages {
		if !whole[p] {
			t.Errorf("%s does not initialize in a whole start: this test names the wrong packages", p)
		}
		if shim[p] {
			t.Errorf("%s initialized before the supervisor ran", p)
		}
	}
	if len(shim) >= len(whole) {
		t.Errorf("the supervisor ran after %d initializers, a whole start runs %d", len(shim), len(whole))
	}
}

// BenchmarkSupervisorStart is the CPU (user and system) of starting this
// binary as a supervisor that exits at once, beside a start that
// initializes every package (the test binary with no test to run).
//
//	go test -run '^$' -bench SupervisorStart ./cmd/legion
func BenchmarkSupervisorStart(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"supervisor", []string{process.ShimCommand}, 2},
		{"whole-binary", []string{"-test.run=^$"}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(exe, c.args...)
				err := cmd.Run()
				if code := cmd.ProcessState.ExitCode(); code != c.code {
					b.Fatalf("%q: exit %d (%v), want %d", c.args, code, err, c.code)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/start")
		})
	}
}
