package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail"
)

// Once a task's pod is removed, the end of each container's output stays
// on the node for legion logs, as long as the task does: the planner
// deletes old tasks (a service's history, a CronJob's limits), and the
// output of a task no assignment set names any more goes with it. Kept
// for good, a CronJob running each minute would leave a GiB a day.

// SavedOutput is how much of each container's output is kept once its
// pod is removed.
const SavedOutput = 1 << 20

// OutputSweepEvery bounds how often an assignment set starts a sweep of
// the saved output of tasks that are gone.
const OutputSweepEvery = time.Minute

// SavedOutputDir is where a finished task's output is kept.
func SavedOutputDir(dataDir, taskUID string) string {
	return filepath.Join(dataDir, "logs", taskUID)
}

// saveOutput keeps the last SavedOutput bytes of a container's log.
func (a *Agent) saveOutput(ctx context.Context, t *legion.Task, container string) {
	rc, err := a.Runtime.Logs(ctx, containerID(t, container), jail.LogOptions{})
	if err != nil {
		if !errors.Is(err, jail.ErrNotFound) {
			a.log.Debug("reading output to save", "container", container, "err", err)
		}
		return
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil || len(data) == 0 {
		return
	}
	if len(data) > SavedOutput {
		data = data[len(data)-SavedOutput:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:] // whole records only
		}
	}
	dir := SavedOutputDir(a.DataDir, t.Metadata.UID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	os.WriteFile(filepath.Join(dir, container+".log"), data, 0o600)
}

// sweepOutputLocked starts, at most once per OutputSweepEvery, a sweep of
// the saved output of every task the set (held, by uid) does not name.
// A worker still running keeps its task's: it may be saving it now.
// Callers hold a.mu.
func (a *Agent) sweepOutputLocked(held map[string]bool) {
	now := a.now()
	if !a.outputSwept.IsZero() && now.Sub(a.outputSwept) < OutputSweepEvery {
		return
	}
	a.outputSwept = now
	keep := make(map[string]bool, len(held)+len(a.workers))
	for uid := range held {
		keep[uid] = true
	}
	for uid := range a.workers {
		keep[uid] = true
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.sweepOutput(keep)
	}()
}

// sweepOutput removes the saved output of the tasks keep does not name.
func (a *Agent) sweepOutput(keep map[string]bool) {
	root := filepath.Join(a.DataDir, "logs")
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("reading the saved output of ended tasks", "err", err)
		}
		return
	}
	for _, e := range entries {
		if keep[e.Name()] || !e.IsDir() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			a.log.Warn("removing the saved output of a task that is gone", "task", e.Name(), "err", err)
		}
	}
}
