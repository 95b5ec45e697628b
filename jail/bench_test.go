package jail_test

import (
	"os"
	"testing"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/sys"
)

// BenchmarkHostJailsCreateStartRemove measures one container's life under
// the jail runtime, its FreeBSD commands answered by a fake and its
// supervisor and process real (as in the conformance suite). Set beside
// the process runtime's BenchmarkCreateStartRemove: the same supervisor,
// started the same way.
func BenchmarkHostJailsCreateStartRemove(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fake := sys.NewFake().
		On("sysctl -n kern.boottime", sys.Answer{Stdout: "{ sec = 1764000000, usec = 0 }"}).
		On("jls --libxo=json -j ", sys.Answer{Stdout: jlsDefaults})
	j, err := jail.NewJails(jail.Config{DataDir: b.TempDir(), Runner: hostRunner{shim: exe, fake: fake}, Shim: exe})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(j.Wait)
	jailtest.BenchmarkLife(b, j)
}
