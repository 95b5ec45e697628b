package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile, in a data directory, is held (flock) by the one process using
// the directory and names its pid.
const LockFile = "lock"

// ErrDataDirInUse is returned when another process holds a data
// directory.
var ErrDataDirInUse = errors.New("data directory in use")

// DataDirLock is a held data directory; Release lets it go.
type DataDirLock struct{ f *os.File }

// LockDataDir takes dir for this process, or refuses at once, naming the
// process holding it: two daemons on one directory would adopt each
// other's pods and fight over its files. The lock goes with the process,
// however it ends.
func LockDataDir(dir string) (*DataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(p); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = "process " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("%w: %s is held by %s (a legion daemon, legion up or restore); stop it first", ErrDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("data directory lock %s: %w", p, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DataDirLock{f: f}, nil
}

// Release lets the directory go.
func (l *DataDirLock) Release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the descriptor drops the flock
		l.f = nil
	}
}
