package process

import (
	"fmt"
	"os"

	"github.com/legionbsd/legion/jail"
)

// ShimCommand is the word cmd/legion dispatches to ShimMain.
const ShimCommand = "process-shim"

// ShimLogFile holds what the supervisor itself says (not the container's
// output), in the container's directory.
const ShimLogFile = jail.ShimLogFile

// front is the supervisor of a container run as host processes in their
// own session, killed as a group at the end.
var front = jail.ShimFront{Command: ShimCommand, Supervisor: func(dir string) *jail.Supervisor {
	return &jail.Supervisor{Dir: dir, Starter: starter(), Kill: jail.KillGroup}
}}

// ShimMain is `legion process-shim`; args are the words after it. It
// returns the process's exit code.
//
//	start DIR      start the container recorded in DIR under a detached
//	               supervisor and exit once its process runs: 0, or
//	               jail.ShimExitPermanent / jail.ShimExitFailed with the
//	               reason on standard error (jail.ShimFront.Start)
//	supervise DIR  the supervisor itself (started by start)
func ShimMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: legion process-shim start|supervise DIR")
		return 2
	}
	switch args[0] {
	case "start":
		return front.Start(args[1])
	case "supervise":
		return front.Supervise(args[1])
	}
	fmt.Fprintf(os.Stderr, "process-shim: unknown mode %q: expected start or supervise\n", args[0])
	return 2
}

// starter runs containers as host processes in their own session,
// chrooted into their root when we may, in their pod's network namespace
// when the spec names one.
func starter() nsStarter { return nsStarter{jail.HostStarter{Chroot: os.Geteuid() == 0}} }
