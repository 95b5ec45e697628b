//go:build !linux && !freebsd

package jail

import (
	"errors"
	"os"
)

func openPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("pseudo-terminals are supported on FreeBSD and Linux only")
}
