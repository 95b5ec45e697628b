//go:build !linux

package store

import "os"

// datasync makes a file's data durable: a full fsync where fdatasync is
// not offered by the syscall package (FreeBSD).
func datasync(f *os.File) error { return f.Sync() }
