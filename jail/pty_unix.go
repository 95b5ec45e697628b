//go:build linux || freebsd

package jail

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// setWinsize sets a pseudo-terminal's size; on either side of the pair it
// reaches the terminal, whose foreground processes get SIGWINCH.
func setWinsize(f *os.File, s TermSize) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("terminal size %s: %w", s, err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return fmt.Errorf("terminal size %s: %w", s, serr)
	}
	return nil
}
