package process_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

// BenchmarkCreateStartRemove measures one container's life under the
// process runtime: record, supervisor start (two execs of the binary),
// stop with its signal, removal.
func BenchmarkCreateStartRemove(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	r, err := process.New(process.Config{DataDir: b.TempDir(), Shim: exe})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		id := "c" + strconv.Itoa(i)
		sp := jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", "sleep 600 & wait"},
			ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}, StopGrace: time.Second}
		if err := r.Create(ctx, sp); err != nil {
			b.Fatal(err)
		}
		if err := r.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := r.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
