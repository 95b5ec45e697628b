//go:build !freebsd

package jail

import "os"

// shimSupervisor off FreeBSD runs the container as host processes in its
// own session (chrooted when root), killed as a group at the end. It
// isolates nothing; it is how the supervisor is tested off FreeBSD.
func shimSupervisor(dir string) *Supervisor {
	return &Supervisor{Dir: dir, Starter: HostStarter{Chroot: os.Getuid() == 0}, Kill: KillGroup}
}
