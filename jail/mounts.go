package jail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// mountPoint is one mount the runtime makes in a container's root.
type mountPoint struct {
	path string   // host path of the target
	cmd  []string // the mount command
	post [][]string
}

// mounts lists a container's mounts in order: devfs (ruleset 4) made by
// the runtime, the Linux file systems, then the spec's.
func (j *Jails) mounts(rec Record, makeTargets bool) ([]mountPoint, error) {
	root := rec.Spec.Root.Path
	target := func(t string, file bool) (string, error) {
		if !makeTargets {
			return strings.TrimSuffix(root, "/") + filepath.Clean(t), nil
		}
		return MakeTarget(root, t, file)
	}
	var out []mountPoint
	dev, err := target("/dev", false)
	if err != nil {
		return nil, err
	}
	rs := strconv.Itoa(DevfsRuleset)
	out = append(out, mountPoint{path: dev, cmd: []string{"mount", "-t", "devfs", "devfs", dev},
		post: [][]string{{"devfs", "-m", dev, "ruleset", rs}, {"devfs", "-m", dev, "rule", "applyset"}}})
	if rec.Spec.Linux {
		for _, m := range []struct{ fs, at, opts string }{
			{"linprocfs", "/proc", ""}, {"linsysfs", "/sys", ""},
		} {
			p, err := target(m.at, false)
			if err != nil {
				return nil, err
			}
			out = append(out, mountPoint{path: p, cmd: []string{"mount", "-t", m.fs, m.fs, p}})
		}
		// /dev/fd is devfs's own directory, so no target is made for it.
		fd := dev + "/fd"
		out = append(out, mountPoint{path: fd, cmd: []string{"mount", "-t", "fdescfs", "-o", "linrdlnk", "fdescfs", fd}})
		// Nothing mounts on a devfs directory, so /dev/shm is a link, shown
		// in this devfs alone, to a tmpfs in the root.
		shm, err := target("/.legion-shm", false)
		if err != nil {
			return nil, err
		}
		out = append(out, mountPoint{path: shm, cmd: []string{"mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", shm},
			post: [][]string{{"ln", "-s", "/.legion-shm", dev + "/shm"}, {"devfs", "-m", dev, "rule", "apply", "path", "shm", "unhide"}}})
	}
	for i, m := range rec.Spec.Mounts {
		file := false
		if m.Kind == MountNullfs && makeTargets {
			st, err := os.Stat(m.Source)
			if err != nil {
				return nil, fmt.Errorf("mounts[%d].source %s: %w", i, m.Source, err)
			}
			file = !st.IsDir()
		}
		p, err := target(m.Target, file)
		if err != nil {
			return nil, fmt.Errorf("mounts[%d]: %w", i, err)
		}
		var cmd []string
		switch m.Kind {
		case MountNullfs:
			cmd = []string{"mount_nullfs"}
			if m.ReadOnly {
				cmd = append(cmd, "-o", "ro")
			}
			cmd = append(cmd, m.Source, p)
		case MountTmpfs:
			cmd = []string{"mount", "-t", "tmpfs"}
			if m.ReadOnly {
				cmd = append(cmd, "-o", "ro")
			}
			cmd = append(cmd, "tmpfs", p)
		case MountDevfs:
			cmd = []string{"mount", "-t", "devfs", "devfs", p}
		}
		out = append(out, mountPoint{path: p, cmd: cmd})
	}
	return out, nil
}

func (j *Jails) mountAll(ctx context.Context, rec Record) error {
	mps, err := j.mounts(rec, true)
	if err != nil {
		return fmt.Errorf("container %s: %w", rec.Spec.ID, err)
	}
	undo := func(n int) {
		for i := n - 1; i >= 0; i-- {
			j.run(ctx, "umount", "-f", mps[i].path)
		}
	}
	for i, mp := range mps {
		if _, err := j.run(ctx, mp.cmd[0], mp.cmd[1:]...); err != nil {
			undo(i)
			return fmt.Errorf("container %s: mount %s: %w", rec.Spec.ID, mp.path, err)
		}
		for _, c := range mp.post {
			if _, err := j.run(ctx, c[0], c[1:]...); err != nil {
				undo(i + 1)
				return fmt.Errorf("container %s: %w", rec.Spec.ID, err)
			}
		}
	}
	return nil
}

// unmountAll unmounts in reverse order, forcibly, and goes on past
// failures (something already unmounted), returning the first.
func (j *Jails) unmountAll(ctx context.Context, rec Record) error {
	mps, err := j.mounts(rec, false)
	if err != nil {
		return err
	}
	var first error
	for i := len(mps) - 1; i >= 0; i-- {
		_, err := j.run(ctx, "umount", "-f", mps[i].path)
		if err != nil && !notMounted(err) && first == nil {
			first = fmt.Errorf("container %s: unmount %s: %w", rec.Spec.ID, mps[i].path, err)
		}
	}
	return first
}

// notMounted reports umount(8) refusing a path because nothing is mounted
// there (standard error, exit 1): a directory is "not a file system root
// directory", anything else found in no mount "unknown file system" (a
// file mounted over a file, after a reboot), a missing path first "No
// such file or directory".
func notMounted(err error) bool {
	return sys.IsExit(err, "not a file system root directory") || sys.IsExit(err, "unknown file system") ||
		sys.IsExit(err, "No such file or directory")
}
