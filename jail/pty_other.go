//go:build !linux && !freebsd

package jail

import (
	"errors"
	"os"
)

var errNoPTY = errors.New("pseudo-terminals are supported on FreeBSD and Linux only")

func openPTY() (master, slave *os.File, err error) {
	return nil, nil, errNoPTY
}

func setWinsize(*os.File, TermSize) error { return errNoPTY }
