package volumes

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the file system holding dir to disk: one sync for a
// whole stream instead of one fsync per file.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
