package resolver

import "golang.org/x/sys/unix"

// reusePortOption lets several UDP sockets bind one address, the kernel
// spreading clients over them.
const reusePortOption = unix.SO_REUSEPORT
