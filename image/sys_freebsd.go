package image

import (
	"os"
	"syscall"

	"github.com/legionbsd/legion/sys"
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

// flagNames renders st_flags as chflags(1) keywords, as bsdtar records
// them; flags without a keyword here are left out.
func flagNames(fl uint32) string {
	names := []struct {
		bit  uint32
		name string
	}{
		// Values of <sys/stat.h>.
		{0x00010000, "arch"}, {0x00000001, "nodump"}, {0x00000008, "opaque"},
		{0x00040000, "sappnd"}, {0x00020000, "schg"}, {0x00100000, "sunlnk"},
		{0x00000004, "uappnd"}, {0x00000002, "uchg"}, {0x00000010, "uunlnk"},
	}
	out := ""
	for _, n := range names {
		if fl&n.bit != 0 {
			if out != "" {
				out += ","
			}
			out += n.name
		}
	}
	return out
}
