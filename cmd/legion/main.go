// Command legion is Legion's one binary: the CLI, and (with `daemon`) the
// manager and node agent. It only composes the library's packages.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
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
