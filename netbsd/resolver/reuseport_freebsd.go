package resolver

import "golang.org/x/sys/unix"

// reusePortOption lets several UDP sockets bind one address, the kernel
// spreading clients over them (plain SO_REUSEPORT gives every datagram
// to one socket on FreeBSD).
const reusePortOption = unix.SO_REUSEPORT_LB
