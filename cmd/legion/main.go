// Command legion is Legion's one binary: the CLI, and (with `daemon`) the
// manager and node agent. It only composes the library's packages.
package main

import (
	"errors"
	"fmt"
	"github.com/spf13/cobra"
	"os"

	// The container supervisors (`legion jail-shim`, `legion
	// process-shim`) are this same binary: package shim runs them from its
	// initializer, before the packages only the CLI and the daemon need.
	_ "github.com/legionbsd/legion/jail/shim"
)

func main() {
	root := newRootCommand()
	if err := execute(root); err != nil {
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

// execute runs the command line, adding to its error what the settings
// in effect explain.
func execute(root *cobra.Command) error {
	cmd, err := root.ExecuteC()
	return contextUnreachable(cmd, err)
}

// exitError ends the command with a code after printing msg (if any) to
// standard error.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
