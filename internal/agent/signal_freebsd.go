package agent

import "syscall"

// The realtime signals' range on FreeBSD (sys/signal.h), where stop
// signals named SIGRTMIN+n or SIGRTMAX-n land.
const (
	sigRTMin syscall.Signal = 65
	sigRTMax syscall.Signal = 126
)
