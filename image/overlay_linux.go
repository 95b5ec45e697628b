package image

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// errOverlayPath: overlayfs would misread the store's path.
var errOverlayPath = errors.New("path holds a character overlayfs separates options with")

// overlaySource names Legion's root mounts in the mount table.
const overlaySource = "legion-root"

// mountOverlay mounts at target the tree lower with writes going to
// upper (work is overlayfs's scratch directory on upper's file system).
// Paths overlayfs would read as separators (',' between options, ':'
// between lower layers) or escapes are refused.
func mountOverlay(lower, upper, work, target string) error {
	for _, p := range []string{lower, upper, work} {
		if strings.ContainsAny(p, ",:\\") {
			return errOverlayPath
		}
	}
	return unix.Mount(overlaySource, target, "overlay", 0,
		"lowerdir="+lower+",upperdir="+upper+",workdir="+work)
}

// unmountOverlay detaches a root's mount, so one a process still holds
// goes as soon as it can; a root that is not mounted is no error.
func unmountOverlay(target string) error {
	err := unix.Unmount(target, unix.MNT_DETACH)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// mountedOver reports whether something is mounted on dir: its device
// differs from its parent's.
func mountedOver(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(dir+"/..", &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}
