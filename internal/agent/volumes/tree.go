package volumes

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// entry is one file of a volume's tree as both the local copy and the
// stream see it.
type entry struct {
	rel   string // slash-separated, "." for the root
	mode  fs.FileMode
	uid   int
	gid   int
	size  int64
	mtime time.Time
	link  string // a symlink's target
}

// statEntry reads what a tree entry keeps. Devices are refused: a volume
// holds data, and a jail cannot make one anyway.
func statEntry(root, rel string) (entry, error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return entry{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return entry{}, fmt.Errorf("%s: no owner information", p)
	}
	e := entry{rel: rel, mode: fi.Mode(), uid: int(st.Uid), gid: int(st.Gid), mtime: fi.ModTime()}
	switch t := fi.Mode().Type(); {
	case t == 0:
		e.size = fi.Size()
	case t&fs.ModeSymlink != 0:
		if e.link, err = os.Readlink(p); err != nil {
			return entry{}, err
		}
	case t&fs.ModeDevice != 0:
		return entry{}, fmt.Errorf("%s: a device file, which a volume does not keep", p)
	}
	return e, nil
}

// skipped says whether a tree entry is left out of copies and streams: a
// socket means nothing away from the process that bound it (tar skips
// them too).
func skipped(m fs.FileMode) bool { return m&fs.ModeSocket != 0 }

// walk calls fn for every entry below root (root itself first, as "."),
// parents before children.
func walk(root string, fn func(e entry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		e, err := statEntry(root, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if skipped(e.mode) {
			return nil
		}
		return fn(e)
	})
}

// setMeta gives a made entry its owner, mode and modification time.
// Owner goes first: chown clears the set-id bits.
func setMeta(p string, e entry) error {
	if err := os.Lchown(p, e.uid, e.gid); err != nil {
		return err
	}
	if e.mode&fs.ModeSymlink == 0 {
		if err := os.Chmod(p, e.mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", p, err)
	}
	return nil
}

// makeEntry makes e at p with content from r (regular files), without
// its metadata for directories (set once their children are in, as
// making a child changes a directory's time).
func makeEntry(p string, e entry, r io.Reader, buf []byte) error {
	switch t := e.mode.Type(); {
	case t == 0:
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		var n int64
		if in, ok := r.(*os.File); ok {
			n, err = io.Copy(f, in) // the kernel copies (copy_file_range)
		} else {
			// Hide ReadFrom so the large buffer is used, not io.Copy's 32 KiB.
			n, err = io.CopyBuffer(struct{ io.Writer }{f}, r, buf)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if n != e.size {
			return fmt.Errorf("write %s: %d bytes, want %d", p, n, e.size)
		}
	case t&fs.ModeDir != 0:
		if err := os.Mkdir(p, 0o700); err != nil && !(os.IsExist(err) && isDir(p)) {
			return err
		}
		return nil
	case t&fs.ModeSymlink != 0:
		if err := os.Symlink(e.link, p); err != nil {
			return err
		}
	case t&fs.ModeNamedPipe != 0:
		if err := unix.Mkfifo(p, 0o600); err != nil {
			return fmt.Errorf("make fifo %s: %w", p, err)
		}
	default:
		return fmt.Errorf("%s: file type %v is not kept in a volume", p, t)
	}
	return setMeta(p, e)
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// copyBufSize is the buffer for copies the kernel cannot do itself.
const copyBufSize = 1 << 20

// copyTree copies src to dst (which must not exist) keeping modes,
// owners, symlinks and modification times. Regular files go through
// io.Copy between files, which lets the kernel copy (copy_file_range).
func copyTree(src, dst string) error {
	var dirs []entry
	buf := make([]byte, copyBufSize)
	err := walk(src, func(e entry) error {
		p := filepath.Join(dst, filepath.FromSlash(e.rel))
		if e.mode.IsDir() {
			dirs = append(dirs, e)
			return makeEntry(p, e, nil, nil)
		}
		if !e.mode.IsRegular() {
			return makeEntry(p, e, nil, nil)
		}
		in, err := os.Open(filepath.Join(src, filepath.FromSlash(e.rel)))
		if err != nil {
			return err
		}
		defer in.Close()
		return makeEntry(p, e, in, buf)
	})
	if err != nil {
		return err
	}
	return setDirMeta(dst, dirs)
}

// setDirMeta sets directories' metadata deepest first, so setting one
// does not disturb a parent's time set before.
func setDirMeta(root string, dirs []entry) error {
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := setMeta(filepath.Join(root, filepath.FromSlash(dirs[i].rel)), dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
