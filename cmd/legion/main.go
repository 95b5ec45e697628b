// Command legion is Legion's one binary: the CLI, and (with `daemon`) the
// manager and node agent. It only composes the library's packages.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

func main() {
	// Supervisors are this same binary, dispatched before anything else
	// starts: they fork and must stay single-threaded until they do.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "jail-shim":
			os.Exit(jail.ShimMain(os.Args[2:]))
		case "process-shim":
			os.Exit(process.ShimMain(os.Args[2:]))
		}
	}
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "legion:", err)
		os.Exit(1)
	}
}

// exitError ends the command with a code after printing msg (if any) to
// standard error.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
