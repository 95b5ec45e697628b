package image

import (
	"os"
	"syscall"

	"github.com/legionbsd/legion/internal/sys"
	"golang.org/x/sys/unix"
)

func mknod(path string, mode uint32, major, minor int64) error {
	return unix.Mknod(path, mode, unix.Mkdev(uint32(major), uint32(minor)))
}

// hasFlags reports file flags set on a file (st_flags).
func hasFlags(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Flags != 0
}

// defaultFileFlags clears and sets flags with chflags(1) on the host.
func defaultFileFlags() FileFlags { return RunnerFlags{Runner: sys.Exec{}} }

// flagsOf returns a file's st_flags.
func flagsOf(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Flags
	}
	return 0
}
