package image

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// copyTree copies src into the existing directory dst, keeping modes,
// setuid bits, numeric owners (when owner), times, links, hard links and,
// through setFlags (nil where there are none), file flags, never
// following a link. Extended attributes are not copied.
//
// With link, a regular file without file flags is not copied but hard
// linked: dst then shares the file with src, which is right only when
// nothing writes into dst's files in place (a layer's extraction replaces
// a file rather than writing into it). A file with flags is copied (schg
// refuses links, and clearing flags on a shared file would change src),
// and so is one that cannot be linked (too many links, another file
// system).
func copyTree(src, dst string, owner bool, setFlags func(path string, flags uint32) error, link bool) error {
	type flagged struct {
		path  string
		flags uint32
	}
	var withFlags []flagged
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	type dirTime struct {
		path string
		fi   os.FileInfo
	}
	var dirs []dirTime
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode()
		perm := mode.Perm() | mode&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
		switch {
		case mode.IsDir():
			if rel != "." {
				if err := os.Mkdir(target, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirTime{target, fi})
		case mode&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(l, target); err != nil {
				return err
			}
		case mode.IsRegular() && link && flagsOf(fi) == 0 && os.Link(p, target) == nil:
			// Owner, mode and times are the shared file's: changing them
			// (chown clears setuid bits) would change src too.
			return nil
		case mode.IsRegular():
			if st != nil && st.Nlink > 1 {
				k := inode{uint64(st.Dev), uint64(st.Ino)}
				if first, ok := seen[k]; ok {
					return os.Link(first, target)
				}
				seen[k] = target
			}
			if err := copyFile(p, target); err != nil {
				return err
			}
		case mode&(os.ModeDevice|os.ModeCharDevice|os.ModeNamedPipe) != 0:
			if !owner || st == nil {
				return nil
			}
			m := uint32(perm.Perm())
			switch {
			case mode&os.ModeCharDevice != 0:
				m |= unix.S_IFCHR
			case mode&os.ModeDevice != 0:
				m |= unix.S_IFBLK
			default:
				m |= unix.S_IFIFO
			}
			if err := mknod(target, m, int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: cannot copy file of mode %s", p, mode)
		}
		if owner && st != nil {
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		if fl := flagsOf(fi); fl != 0 && setFlags != nil {
			withFlags = append(withFlags, flagged{target, fl})
		}
		if mode&os.ModeSymlink != 0 {
			ts := []unix.Timespec{unix.NsecToTimespec(fi.ModTime().UnixNano()), unix.NsecToTimespec(fi.ModTime().UnixNano())}
			_ = unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
			return nil
		}
		if !mode.IsDir() {
			if err := os.Chmod(target, perm); err != nil {
				return err
			}
			return os.Chtimes(target, fi.ModTime(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		m := dirs[i].fi.Mode()
		if err := os.Chmod(dirs[i].path, m.Perm()|m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
			return err
		}
		if err := os.Chtimes(dirs[i].path, dirs[i].fi.ModTime(), dirs[i].fi.ModTime()); err != nil {
			return err
		}
	}
	// Flags last: schg forbids every later change.
	for _, f := range withFlags {
		if err := setFlags(f.path, f.flags); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	// io.Copy from *os.File to *os.File lets Go use copy_file_range.
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
