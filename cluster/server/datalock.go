package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
//
// A lock whose named holder is this process or has ended is waited for,
// up to lockWait: flock belongs to the open file, which a child its
// holder was starting shares until the child runs its program
// (close-on-exec), so a lock let go can outlive its release by that
// moment (a manager stopped and restored in one process met it).
func LockDataDir(dir string) (*DataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	for deadline := time.Now().Add(lockWait); ; {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("data directory lock %s: %w", p, err)
		}
		pid := lockHolder(p)
		if (pid == os.Getpid() || (pid > 0 && !alive(pid))) && time.Now().Before(deadline) {
			time.Sleep(lockRetry)
			continue
		}
		f.Close()
		holder := "another process"
		if pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("%w: %s is held by %s (a legion daemon, legion up or restore); stop it first", ErrDataDirInUse, dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DataDirLock{f: f}, nil
}

// lockWait bounds the wait for a lock its holder let go (see
// LockDataDir); lockRetry is how often it is tried meanwhile.
const (
	lockWait  = time.Second
	lockRetry = 10 * time.Millisecond
)

// lockHolder is the pid a lock file names, 0 when it names none.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// alive reports whether process pid exists (signal 0 checks without
// sending one; EPERM means it exists under another user).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Release lets the directory go.
func (l *DataDirLock) Release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the descriptor drops the flock
		l.f = nil
	}
}
