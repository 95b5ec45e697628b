package jailtest

import (
	"os"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

// RefuseSupervisor, first in the TestMain of a test binary that is its own
// container supervisor, exits 3 when the binary was run as one: package
// jail/shim runs the supervisors from its initializer, so one that gets
// here was not run, and going on would run every test again, in every
// container the tests start, and so on.
func RefuseSupervisor() {
	if len(os.Args) > 1 && (os.Args[1] == jail.ShimCommand || os.Args[1] == process.ShimCommand) {
		os.Stderr.WriteString("the supervisor reached TestMain: package shim did not run it\n")
		os.Exit(3)
	}
}
