//go:build freebsd || darwin || netbsd || openbsd || dragonfly

package process

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bootID names the current boot by its time: runs recorded under another
// one are over.
func bootID() (int64, error) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return 0, fmt.Errorf("boot id: sysctl kern.boottime: %w", err)
	}
	return int64(tv.Sec), nil
}
