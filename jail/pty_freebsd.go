//go:build freebsd

package jail

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair with posix_openpt(2); on FreeBSD
// grantpt and unlockpt have nothing to do.
func openPTY() (master, slave *os.File, err error) {
	r, _, errno := unix.Syscall(unix.SYS_POSIX_OPENPT, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0, 0)
	if errno != 0 {
		return nil, nil, fmt.Errorf("posix_openpt: %w", errno)
	}
	fd := int(r)
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
