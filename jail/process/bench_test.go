package process_test

import (
	"os"
	"testing"

	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
)

// BenchmarkCreateStartRemove measures one container's life under the
// process runtime: record, supervisor start (one start of the binary;
// start-ms/op alone), stop with its signal, removal.
func BenchmarkCreateStartRemove(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	r, err := process.New(process.Config{DataDir: b.TempDir(), Shim: exe})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Wait)
	jailtest.BenchmarkLife(b, r)
}
