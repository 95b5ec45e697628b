//go:build !linux && !freebsd

package image

import (
	"errors"
	"os"
)

func mknod(string, uint32, int64, int64) error {
	return errors.New("device nodes are made only on FreeBSD and Linux")
}

func hasFlags(os.FileInfo) bool { return false }

func defaultFileFlags() FileFlags { return nil }

func flagsOf(os.FileInfo) uint32 { return 0 }

func flagNames(uint32) string { return "" }
