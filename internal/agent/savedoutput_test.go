package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail/jailtest"
)

// The saved output of a task lasts as long as the task: once the
// assignment set no longer names a task (the planner deleted it), its
// output goes; an ended task still in the set keeps its own.
func TestSavedOutputGoesWithItsTask(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	save := func(uid string) string {
		p := filepath.Join(SavedOutputDir(dataDir, uid), "main.log")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("done\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kept, gone := save("ended"), save("deleted")
	ended := sweepTask("ended")
	ended.Spec.DesiredState, ended.Status.State = legion.TaskShutdown, legion.TaskComplete
	rt := jailtest.NewMemory()
	t.Cleanup(rt.Close)
	m := &sweepManager{as: Assignments{Tasks: []*legion.Task{ended}}, reports: map[string]legion.TaskStatus{}}
	a := &Agent{Node: "n1", Manager: m, Runtime: rt, Images: noImages{}, Network: sweepNetwork{},
		DataDir: dataDir, RunDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	wait := sync.OnceValue(func() error { stop(); return <-done })
	t.Cleanup(func() { wait() })
	go func() { done <- a.Run(actx) }()

	waitFor(t, "the saved output of a deleted task to go", func() bool {
		_, err := os.Stat(filepath.Dir(gone))
		return errors.Is(err, os.ErrNotExist)
	}, func() string { return "its directory is still there" })
	if err := wait(); err != nil {
		t.Fatalf("agent: %v", err)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "done\n" {
		t.Errorf("the saved output of an ended task still in the set: %q, %v", b, err)
	}
}
