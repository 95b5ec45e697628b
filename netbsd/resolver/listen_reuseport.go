//go:build linux || freebsd

package resolver

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP opens a UDP socket with reusePortOption set where the kernel
// has it (a kernel without it gets a socket of its own: Serve then reads
// from that one).
func listenUDP(addr string) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, reusePortOption, 1)
		})
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// isReusePort tells whether u was opened with reusePortOption, as
// listenUDP does: more sockets may then bind its address.
func isReusePort(u *net.UDPConn) bool {
	rc, err := u.SyscallConn()
	if err != nil {
		return false
	}
	on := false
	rc.Control(func(fd uintptr) {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, reusePortOption)
		on = err == nil && v != 0
	})
	return on
}
