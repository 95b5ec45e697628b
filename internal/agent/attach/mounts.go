package attach

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legionbsd/legion/sys"
)

// Timings.
const (
	// lunWait is how long a LUN may take to show its disk after the login.
	lunWait = 30 * time.Second
	// lunPoll is how often iscsictl is asked about the LUN meanwhile.
	lunPoll = 250 * time.Millisecond
	// undoTimeout bounds undoing a failed attach when the attach's own
	// context has ended.
	undoTimeout = 2 * time.Minute
	// pluginWaitDelay is how long a plugin's output may stay open after
	// it was killed (a child it left holding it) before its pipes are
	// closed.
	pluginWaitDelay = 5 * time.Second
)

// mountedAt reports whether a file system is mounted on dir, from the
// mount table as `mount -p` prints it (fstab lines: device, mount point,
// type, options, dump, pass).
func (a *Attacher) mountedAt(ctx context.Context, dir string) (bool, error) {
	res, err := sys.Run(ctx, a.Runner, "mount", "-p")
	if err != nil {
		return false, err
	}
	want := []string{filepath.Clean(dir)}
	// The table names the mount point as mount(8) resolved it.
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != want[0] {
		want = append(want, real)
	}
	for line := range strings.Lines(string(res.Stdout)) {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[1] == want[0] || (len(want) > 1 && f[1] == want[1])) {
			return true, nil
		}
	}
	return false, nil
}

// unmount unmounts dir and removes the empty mount point. umount(8) says
// "not a file system root directory" of a directory with nothing mounted
// on it and "unknown file system" of one that does not exist: either
// means an earlier try or a failed attach already got this far.
func (a *Attacher) unmount(ctx context.Context, dir string) error {
	_, err := sys.Run(ctx, a.Runner, "umount", dir)
	if err != nil && !sys.IsExit(err, "not a file system root directory") && !sys.IsExit(err, "unknown file system") {
		return err
	}
	a.removeMountPoint(dir)
	return nil
}

// removeMountPoint removes dir if it is empty; one with files in it had
// nothing mounted on it and is left for the task directory's removal.
func (a *Attacher) removeMountPoint(dir string) {
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log().Warn("removing a volume's mount point", "dir", dir, "err", err)
	}
}

// exitText is what a failed command said, on whichever stream it said it:
// fsck(8) and mount(8) helpers report on standard output, others on
// standard error.
func exitText(res sys.Result, err error) string {
	msg := strings.TrimSpace(string(res.Stderr))
	if out := strings.TrimSpace(string(res.Stdout)); out != "" {
		if msg != "" {
			msg += "; "
		}
		msg += out
	}
	if msg == "" && err != nil {
		return err.Error()
	}
	return msg
}
