package image

import (
	"os"

	"golang.org/x/sys/unix"
)

func mknod(path string, mode uint32, major, minor int64) error {
	return unix.Mknod(path, mode, int(unix.Mkdev(uint32(major), uint32(minor))))
}

// hasFlags: Linux has no BSD file flags.
func hasFlags(os.FileInfo) bool { return false }

// defaultFileFlags: nothing to clear off FreeBSD.
func defaultFileFlags() FileFlags { return nil }

// flagsOf: no file flags on Linux.
func flagsOf(os.FileInfo) uint32 { return 0 }

// flagNames: no file flags on Linux.
func flagNames(uint32) string { return "" }
