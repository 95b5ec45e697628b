package process

import (
	"fmt"
	"os"

	"github.com/legionbsd/legion/jail"
)

// ShimCommand is the first argument that makes the legion binary this
// supervisor (package jail/shim dispatches it to ShimMain).
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
//	supervise DIR  the supervisor of the container recorded in DIR,
//	               started by Runtime.Start (jail.ShimFront.Start), which
//	               it tells on descriptor 3 whether the process runs
func ShimMain(args []string) int {
	if len(args) != 2 || args[0] != "supervise" {
		fmt.Fprintln(os.Stderr, "usage: legion process-shim supervise DIR")
		return 2
	}
	return front.Supervise(args[1])
}

// starter runs containers as host processes in their own session,
// chrooted into their root when we may, in their pod's network namespace
// when the spec names one.
func starter() nsStarter { return nsStarter{jail.HostStarter{Chroot: os.Geteuid() == 0}} }
