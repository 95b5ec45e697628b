package process

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/jail"
)

// The supervisors a runtime starts are this process's children: each is
// reaped once it ends (no zombie is left, nothing waits for it), by the
// one reaper whatever the number of containers.
func TestSupervisorsAreReapedWhenTheyEnd(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{DataDir: t.TempDir(), Shim: exe, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Wait)
	ctx := context.Background()
	var shims []int
	for _, id := range []string{"brief-1", "brief-2", "brief-3"} {
		sp := jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", "sleep 600 & wait"},
			ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}}
		if err := r.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Remove(context.Background(), id) })
		if err := r.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		run, ok, err := r.records.Run(id)
		if err != nil || !ok || run.ShimPid == 0 {
			t.Fatalf("%s: run record %+v, %v, %v", id, run, ok, err)
		}
		shims = append(shims, run.ShimPid)
	}
	for _, pid := range shims {
		if !supervisors.waitsFor(pid) {
			t.Fatalf("the reaper does not wait for supervisor %d", pid)
		}
	}
	for _, id := range []string{"brief-1", "brief-2", "brief-3"} {
		if err := r.Stop(ctx, id, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, "the supervisors reaped", 20*time.Second, 10*time.Millisecond, func() bool {
		for _, pid := range shims {
			if jail.ProcessAlive(pid) || supervisors.waitsFor(pid) {
				return false // running, or a zombie nobody reaped
			}
		}
		return true
	})
}
