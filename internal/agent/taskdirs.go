package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/legionbsd/legion/sys"
)

// TmpfsDirs gives each task's private directory a tmpfs of its own
// (FreeBSD), so secrets are held in memory and go with the mount.
type TmpfsDirs struct{ Runner sys.Runner }

// MountTaskDir implements TaskDirs.
func (m TmpfsDirs) MountTaskDir(ctx context.Context, dir string, size int64) error {
	opts := "mode=0700"
	if size > 0 {
		opts += fmt.Sprintf(",size=%d", size)
	}
	_, err := sys.Run(ctx, m.Runner, "mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir)
	return err
}

// UnmountTaskDir implements TaskDirs. umount(8) says "not a file system
// root directory" for a directory with nothing mounted on it, and fails
// statfs with "No such file or directory" for one that is gone.
func (m TmpfsDirs) UnmountTaskDir(ctx context.Context, dir string) error {
	_, err := sys.Run(ctx, m.Runner, "umount", "-f", dir)
	if sys.IsExit(err, "not a file system root directory") || sys.IsExit(err, "No such file or directory") {
		return nil
	}
	return err
}

// taskDir is the task's private directory.
func (a *Agent) taskDir(uid string) string { return filepath.Join(a.RunDir, "tasks", uid) }

// removeTaskDir unmounts a task's file system and removes its directory,
// secrets and all.
func (a *Agent) removeTaskDir(ctx context.Context, uid string) {
	dir := a.taskDir(uid)
	if a.TaskDirs != nil {
		if err := a.TaskDirs.UnmountTaskDir(ctx, dir); err != nil {
			// Removing the directory below still deletes the files on the
			// file system left mounted.
			a.log.Warn("unmounting the task's files", "task", uid, "err", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		a.log.Warn("removing the task's files", "task", uid, "err", err)
	}
}

// sweepTaskDirs removes the private directory of every task whose pod is
// not among those kept: an agent that ended without tearing its tasks down
// (a crash, a kill) leaves their secrets behind, each on a tmpfs of its
// own, and no worker would ever remove them.
func (a *Agent) sweepTaskDirs(ctx context.Context, keep map[string]bool) {
	entries, err := os.ReadDir(filepath.Join(a.RunDir, "tasks"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("reading the task directories left by an earlier agent", "err", err)
		}
		return
	}
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		// Its volumes first: the directory's records say what to undo,
		// and it stays until that succeeds.
		if !a.detachDir(ctx, e.Name()) {
			a.retryDetach(e.Name(), nil)
			continue
		}
		a.log.Info("removing the files of a task whose pod is gone", "task", e.Name())
		a.removeTaskDir(ctx, e.Name())
	}
}
