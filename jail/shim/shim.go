// Package shim makes a binary Legion's container supervisor when it is run
// as one: imported for its side effect, it runs `jail-shim` (jail.ShimMain)
// or `process-shim` (process.ShimMain) when the binary's first argument
// names one, and exits with its code.
//
// It does so from a package initializer, not from main, because a
// supervisor starts for every container and exec. Go initializes the
// packages a binary links before main runs, and most of the legion
// binary's (the API's protobufs, compose's JSON schemas, the terminal UI)
// are nothing a supervisor uses: by the language's rule an initializer
// runs once everything its package imports has run, so here only about
// half of them have, which halves the CPU of a supervisor's start (see
// BenchmarkSupervisorStart in cmd/legion). Its own imports are the
// standard library, golang.org/x/sys and the two runtimes, and must stay
// so.
//
// A program that embeds the runtimes (cmd/legion, examples/jailer, the
// tests that run their own binary as the supervisor) imports it as
//
//	import _ "github.com/legionbsd/legion/jail/shim"
package shim

import (
	"os"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case jail.ShimCommand:
		os.Exit(jail.ShimMain(os.Args[2:]))
	case process.ShimCommand:
		os.Exit(process.ShimMain(os.Args[2:]))
	}
}
