package jail

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSymlinkInPath is returned when a mount target inside a container's
// root passes through a symbolic link: the image's links must not steer a
// mount onto the host's files.
var ErrSymlinkInPath = errors.New("symbolic link in mount target")

// MakeTarget makes target (an absolute path inside the container) under
// root, walking it one component at a time from root with openat and
// refusing any component that is a symbolic link, so the image cannot point
// a mount outside its root. The last component is a directory, or an empty
// file when file is set (a mount of one file). It returns the host path of
// the target.
func MakeTarget(root, target string, file bool) (string, error) {
	if !path.IsAbs(target) {
		return "", fmt.Errorf("mount target %q: expected an absolute path", target)
	}
	clean := path.Clean(target)
	parts := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	if clean == "/" {
		parts = nil
	}
	if file && len(parts) == 0 {
		return "", fmt.Errorf("mount target %q: a file cannot be the root", target)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("container root %s: %w", root, err)
	}
	defer func() { unix.Close(fd) }()
	walked := ""
	for i, name := range parts {
		walked += "/" + name
		last := i == len(parts)-1
		if last && file {
			nfd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return "", targetError(fd, name, walked, target, err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(nfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				unix.Close(nfd)
				return "", fmt.Errorf("mount target %q: %s is not a regular file", target, walked)
			}
			unix.Close(nfd)
			break
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return "", fmt.Errorf("mount target %q: make %s: %w", target, walked, err)
			}
			nfd, err = unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return "", targetError(fd, name, walked, target, err)
		}
		unix.Close(fd)
		fd = nfd
	}
	return strings.TrimSuffix(root, "/") + clean, nil
}

// targetError names a link when the walk met one (Linux says ELOOP,
// FreeBSD EMLINK for O_NOFOLLOW on a link).
func targetError(dirfd int, name, walked, target string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("mount target %q: %s: %w", target, walked, ErrSymlinkInPath)
	}
	return fmt.Errorf("mount target %q: %s: %w", target, walked, err)
}
