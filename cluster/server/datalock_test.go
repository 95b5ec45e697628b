package server

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A second daemon on a data directory in use is refused, naming
// the process holding it; once the first stops, the directory is free.
func TestSecondServerOnADataDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			first.Stop()
		}
	})
	_, err = New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second server on %s: %v, want ErrDataDirInUse naming this process", dir, err)
	}
	first.Stop()
	stopped = true
	again, err := New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Stop()
}

// A server whose address another process listens on says so, and which
// flag gives it another.
func TestServerOnATakenAddressSaysHowToMoveIt(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = New(Config{DataDir: t.TempDir(), Listen: taken.Addr().String()})
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "another process listens there") || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("a server on a taken address: %v, want it said with --listen", err)
	}
}

// A lock this process let go while a child it was starting still shared
// the lock's open file (as a fork does until the child runs its program)
// is taken once the child lets it go, not refused.
func TestALockLetGoIsTakenOnceAChildStartingLetsItGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	childDone := letGoWhileAChildStarts(t, l)
	again, err := LockDataDir(dir)
	childDone()
	if err != nil {
		t.Fatalf("the lock after its holder let it go and the child did: %v", err)
	}
	// The same when the file names a holder that has ended: another
	// process that exited while its child was starting.
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	// Emptied first: pids wrap (at 32,768 by default), so the ended
	// process's pid can be shorter than this one's, and written over it
	// would leave this one's last digits after it.
	if err := again.f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := again.f.WriteAt([]byte(strconv.Itoa(ended.Process.Pid)+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	childDone = letGoWhileAChildStarts(t, again)
	last, err := LockDataDir(dir)
	childDone()
	if err != nil {
		t.Fatalf("the lock its ended holder's child let go: %v", err)
	}
	last.Release()
}

// letGoWhileAChildStarts releases l while a duplicate of its open file,
// as a child being started holds one, stays open a fifth of lockWait
// longer (until the child runs its program); the function returned waits
// for that.
func letGoWhileAChildStarts(t *testing.T, l *DataDirLock) func() {
	t.Helper()
	child, err := unix.Dup(int(l.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	closed := make(chan struct{})
	time.AfterFunc(lockWait/5, func() { unix.Close(child); close(closed) })
	return func() { <-closed }
}
