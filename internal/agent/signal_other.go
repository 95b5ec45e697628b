//go:build !freebsd

package agent

import "syscall"

// The realtime signals' range on Linux, as its C library leaves it to
// programs (the kernel's first two are the library's own), where stop
// signals named SIGRTMIN+n or SIGRTMAX-n land: the numbers Docker sends.
const (
	sigRTMin syscall.Signal = 34
	sigRTMax syscall.Signal = 64
)
