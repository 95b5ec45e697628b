package jailtest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/procstat"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/jail"
)

// SupervisorsAreChildrenReaped starts three HostSleeper containers on rt
// and checks that their supervisors are this process's children
// (started once, never through a front end that exits after starting
// them) and that each is reaped once its container stops, leaving no
// zombie. A container's supervisor is its process's parent. It reads
// /proc: Linux only.
func SupervisorsAreChildrenReaped(t *testing.T, rt jail.Runtime) {
	t.Helper()
	ctx := context.Background()
	ids := []string{"brief-1", "brief-2", "brief-3"}
	var shims []int
	for _, id := range ids {
		t.Cleanup(func() { rt.Remove(context.Background(), id) })
		if err := rt.Create(ctx, HostSleeper(id)); err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		st, err := rt.Inspect(ctx, id)
		if err != nil || st.Pid == 0 {
			t.Fatalf("%s: %+v, %v: want a running process", id, st, err)
		}
		pid, err := procParent(st.Pid)
		if err != nil {
			t.Fatalf("%s: the parent of its process %d: %v", id, st.Pid, err)
		}
		shims = append(shims, pid)
	}
	for _, pid := range shims {
		ppid, err := procParent(pid)
		if err != nil {
			t.Fatalf("supervisor %d: %v", pid, err)
		}
		if ppid != os.Getpid() {
			t.Fatalf("supervisor %d is the child of %d, not of this process (%d)", pid, ppid, os.Getpid())
		}
	}
	for _, id := range ids {
		if err := rt.Stop(ctx, id, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, "the supervisors reaped", 20*time.Second, 10*time.Millisecond, func() bool {
		for _, pid := range shims {
			// Gone from /proc once reaped; a zombie stays, state Z.
			if _, err := procParent(pid); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	})
}

// procParent reads a process's parent from /proc/<pid>/stat.
func procParent(pid int) (int, error) {
	st, err := procstat.Read(pid)
	return st.Parent, err
}

// HostSleeper is a container that runs on the host's own tree until it is
// stopped, for runtimes whose containers are host processes.
func HostSleeper(id string) jail.ContainerSpec {
	return jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", "sleep 600 & wait"},
		ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}, StopGrace: time.Second}
}

// BenchmarkLife measures one container's life on rt, a HostSleeper:
// record, supervisor start (its own figure, start-ms/op), stop, removal.
func BenchmarkLife(b *testing.B, rt jail.Runtime) {
	ctx := context.Background()
	var starting time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := "c" + strconv.Itoa(i)
		if err := rt.Create(ctx, HostSleeper(id)); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := rt.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		starting += time.Since(t0)
		if err := rt.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(starting.Microseconds())/1000/float64(b.N), "start-ms/op")
}
