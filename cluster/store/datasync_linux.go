package store

import (
	"os"
	"syscall"
)

// datasync makes a file's data (and its length) durable, skipping the
// times a full fsync also writes.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
