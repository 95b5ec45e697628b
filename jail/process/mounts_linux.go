package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/legionbsd/legion/jail"
)

// mountsSupported: Linux makes the mounts with mount(2).
const mountsSupported = true

// devNodes are the character devices of a container's minimal /dev.
var devNodes = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// mountPoint is one mount in a container's root.
type mountPoint struct {
	target string // inside the container
	source string // a nullfs mount's host path: its target is a file when it is
	mount  func(p string) error
}

// mountPoints lists a container's mounts in order: a minimal /dev (as a
// jail gets devfs), then the spec's.
func mountPoints(rec jail.Record) []mountPoint {
	out := []mountPoint{{target: "/dev", mount: mountDev}}
	for _, m := range rec.Spec.Mounts {
		switch m.Kind {
		case jail.MountNullfs:
			out = append(out, mountPoint{target: m.Target, source: m.Source,
				mount: func(p string) error { return bind(m.Source, p, m.ReadOnly) }})
		case jail.MountTmpfs:
			var flags uintptr = unix.MS_NOSUID | unix.MS_NODEV
			if m.ReadOnly {
				flags |= unix.MS_RDONLY
			}
			out = append(out, mountPoint{target: m.Target, mount: func(p string) error {
				return unix.Mount("tmpfs", p, "tmpfs", flags, "mode=1777")
			}})
		case jail.MountDevfs:
			out = append(out, mountPoint{target: m.Target, mount: mountDev})
		}
	}
	return out
}

// hostPath is where target is on the host, for unmounting.
func hostPath(root, target string) string {
	return strings.TrimSuffix(root, "/") + filepath.Clean("/"+target)
}

// bind makes src visible at p, read-only when asked (a second, remounting
// call: the first ignores MS_RDONLY).
func bind(src, p string, ro bool) error {
	if err := unix.Mount(src, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if ro {
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			unix.Unmount(p, unix.MNT_DETACH)
			return fmt.Errorf("bind %s read-only: %w", src, err)
		}
	}
	return nil
}

// mountDev makes a /dev of its own on a tmpfs, holding the usual
// character devices: never the host's /dev, which removing the root would
// otherwise reach.
func mountDev(p string) error {
	if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=1m"); err != nil {
		return fmt.Errorf("dev tmpfs: %w", err)
	}
	for _, d := range devNodes {
		n := filepath.Join(p, d.name)
		if err := unix.Mknod(n, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			unix.Unmount(p, unix.MNT_DETACH)
			return fmt.Errorf("dev %s: %w", d.name, err)
		}
		os.Chmod(n, 0o666) // past the umask
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		os.Symlink(to, filepath.Join(p, name))
	}
	if err := os.Mkdir(filepath.Join(p, "shm"), 0o1777); err == nil {
		os.Chmod(filepath.Join(p, "shm"), 0o1777|os.ModeSticky)
	}
	return nil
}

// mountAll makes the mounts in order, each target made inside the root
// just before its mount (so one may lie in an earlier mount) without
// following the image's links (jail.MakeTarget). It undoes what it made
// when one fails.
func mountAll(rec jail.Record) error {
	root := rec.Spec.Root.Path
	var done []string
	undo := func() {
		for j := len(done) - 1; j >= 0; j-- {
			unix.Unmount(done[j], unix.MNT_DETACH)
		}
	}
	for i, mp := range mountPoints(rec) {
		file := false
		if mp.source != "" {
			st, err := os.Stat(mp.source)
			if err != nil {
				undo()
				return fmt.Errorf("container %s: mounts[%d].source: %w", rec.Spec.ID, i, err)
			}
			file = !st.IsDir()
		}
		p, err := jail.MakeTarget(root, mp.target, file)
		if err == nil {
			err = mp.mount(p)
		}
		if err != nil {
			undo()
			return fmt.Errorf("container %s: mount at %s: %w", rec.Spec.ID, mp.target, err)
		}
		done = append(done, p)
	}
	return nil
}

// unmountAll unmounts in reverse order (detached, so a busy one goes as
// soon as it can), going on past targets that are not mounted.
func unmountAll(rec jail.Record) error {
	mps := mountPoints(rec)
	var errs []error
	for i := len(mps) - 1; i >= 0; i-- {
		p := hostPath(rec.Spec.Root.Path, mps[i].target)
		err := unix.Unmount(p, unix.MNT_DETACH)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("container %s: unmount %s: %w", rec.Spec.ID, p, err))
		}
	}
	return errors.Join(errs...)
}
