package jail_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

// BenchmarkHostJailsCreateStartRemove measures one container's life under
// the jail runtime, its FreeBSD commands answered by a fake and its
// supervisor and process real (as in the conformance suite): record,
// supervisor start (start-ms/op alone), stop, removal. Set beside the process runtime's
// BenchmarkCreateStartRemove: the same supervisor, started the same way.
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
	ctx := context.Background()
	var starting time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := "c" + strconv.Itoa(i)
		sp := jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", "sleep 600 & wait"},
			ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}, StopGrace: time.Second}
		if err := j.Create(ctx, sp); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := j.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		starting += time.Since(t0)
		if err := j.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		fake.Reset() // its record of commands would grow with b.N
	}
	b.ReportMetric(float64(starting.Microseconds())/1000/float64(b.N), "start-ms/op")
}
