package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the test plays the terminal on
// the master side, the CLI reads its size on the other.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

func setSize(t *testing.T, f *os.File, rows, cols uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
}

// exec -t sends the size of the terminal on standard input, then its new
// size on each SIGWINCH, until stopped.
func TestFollowTerminal(t *testing.T) {
	t.Parallel()
	master, slave := openPTY(t)
	setSize(t, master, 25, 90)
	size, resizes, stop := followTerminal(slave)
	t.Cleanup(stop)
	if size == nil || *size != (client.TermSize{Rows: 25, Cols: 90}) {
		t.Fatalf("size %v, want 25x90", size)
	}
	setSize(t, master, 50, 160)
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-resizes:
		if got != (client.TermSize{Rows: 50, Cols: 160}) {
			t.Fatalf("resize %v, want 50x160", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resize after SIGWINCH")
	}
	stop()
	select {
	case s, ok := <-resizes:
		if ok {
			t.Fatalf("a resize %v after stop", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resizes not closed by stop")
	}
	// Off a terminal there is no size to send.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if size, resizes, _ := followTerminal(r); size != nil || resizes != nil {
		t.Fatalf("a pipe: size %v, resizes %v; want neither", size, resizes)
	}
}
