package jail_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	// The test binary is also the supervisor: the runtime runs it as
	// `<test binary> jail-shim ...`, as it runs `legion jail-shim ...`.
	_ "github.com/legionbsd/legion/jail/shim"
	"github.com/legionbsd/legion/sys"
)

// TestMain stops a supervisor that got this far (see
// jailtest.RefuseSupervisor).
func TestMain(m *testing.M) {
	jailtest.RefuseSupervisor()
	os.Exit(m.Run())
}

// hostRunner runs the supervisor and kill for real and answers the
// FreeBSD commands (jail, jls, mount, rctl, ...) from a fake, so the jail
// runtime's own code runs the conformance suite off FreeBSD with its
// containers as host processes.
type hostRunner struct {
	shim string
	fake *sys.Fake
}

func (r hostRunner) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	if c.Name == r.shim || c.Name == "kill" {
		return sys.Exec{}.Run(ctx, c)
	}
	return r.fake.Run(ctx, c)
}

// Every value jls gives is a string; this one jail has the defaults.
const jlsDefaults = `{"__version": "2", "jail-information": {"jail": [{"vnet": "new",
 "allow.raw_sockets": "false", "allow.chflags": "false", "allow.mlock": "false", "allow.mount": "false",
 "sysvmsg": "disable", "sysvsem": "disable", "sysvshm": "disable", "enforce_statfs": "2", "securelevel": "2"}]}}`

func TestJailsConformanceWithHostProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name    string
		spawner jail.Spawner
	}{{"ExecThroughRunner", nil}, {"ExecStreamed", jail.ExecSpawner{}}} {
		t.Run(mode.name, func(t *testing.T) { runHostConformance(t, exe, mode.spawner) })
	}
}

// newHostJails is the jail runtime with its containers as host processes.
func newHostJails(t *testing.T, exe string, spawner jail.Spawner) *jail.Jails {
	fake := sys.NewFake().
		On("sysctl -n kern.boottime", sys.Answer{Stdout: "{ sec = 1764000000, usec = 0 }"}).
		On("jls --libxo=json -j ", sys.Answer{Stdout: jlsDefaults}).
		On("rctl -u ", sys.Answer{Stdout: "cputime=0\nmemoryuse=1048576\nmaxproc=1\nopenfiles=3\n"})
	j, err := jail.NewJails(jail.Config{DataDir: t.TempDir(), Runner: hostRunner{shim: exe, fake: fake}, Shim: exe, Spawner: spawner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Wait)
	return j
}

func runHostConformance(t *testing.T, exe string, spawner jail.Spawner) {
	jailtest.RunConformance(t, func(t *testing.T) jail.Runtime {
		return newHostJails(t, exe, spawner)
	},
		// The host's own tree is the root: its /bin/sh runs the suite's scripts.
		jailtest.WithRoot(func(t *testing.T, id string) jail.Root { return jail.Root{Path: "/"} }),
		jailtest.WithTimeout(20*time.Second))
}

// Exec with a terminal: the command sees one on its standard streams.
func TestExecWithTerminal(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skip("no /dev/ptmx here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j := newHostJails(t, exe, jail.ExecSpawner{})
	spec := jail.ContainerSpec{ID: "c1", Command: []string{"/bin/sh", "-c", "sleep 600 & wait"}, Root: jail.Root{Path: "/"}}
	if err := j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer j.Remove(context.Background(), "c1")
	if err := j.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	code, err := j.Exec(ctx, "c1", jail.ExecSpec{TTY: true,
		Command: []string{"/bin/sh", "-c", "test -t 0 && test -t 1 && echo on-a-terminal $TERM; exit 4"},
		Stdin:   strings.NewReader(""), Stdout: &out, Stderr: &out})
	if err != nil || code != 4 {
		t.Fatalf("exec: code %d %v, output %q", code, err, out.String())
	}
	if !strings.Contains(out.String(), "on-a-terminal xterm") {
		t.Fatalf("output %q: want the command on a terminal", out.String())
	}
	// Without a terminal the same test fails.
	out.Reset()
	code, err = j.Exec(ctx, "c1", jail.ExecSpec{Command: []string{"/bin/sh", "-c", "test -t 1 || echo no-terminal"}, Stdout: &out})
	if err != nil || code != 0 || out.String() != "no-terminal\n" {
		t.Fatalf("exec without a terminal: %d %v %q", code, err, out.String())
	}
}
