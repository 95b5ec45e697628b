package server

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A second daemon on a data directory in use is refused at once, naming
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
