package jail_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/sys"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
)

// The test binary is also the supervisor: the runtime runs it as
// `<test binary> jail-shim ...`, as it runs `legion jail-shim ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "jail-shim" {
		os.Exit(jail.ShimMain(os.Args[2:]))
	}
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

func runHostConformance(t *testing.T, exe string, spawner jail.Spawner) {
	jailtest.RunConformance(t, func(t *testing.T) jail.Runtime {
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
	},
		// The host's own tree is the root: its /bin/sh runs the suite's scripts.
		jailtest.WithRoot(func(t *testing.T, id string) jail.Root { return jail.Root{Path: "/"} }),
		jailtest.WithTimeout(20*time.Second))
}
