//go:build !linux

package process

import "github.com/legionbsd/legion/jail"

// mountsSupported: off Linux the process runtime makes no mounts (a
// FreeBSD host uses the jail runtime, which does).
const mountsSupported = false

func mountAll(jail.Record) error   { return nil }
func unmountAll(jail.Record) error { return nil }
