package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// legion version prints on standard output, with the commit and the Go
// that built it.
func TestVersionOnStdout(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	root := rootWith(&out, &errOut, "version")
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if errOut.Len() > 0 || !strings.HasPrefix(out.String(), "legion "+version+" (commit ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// The top-level help lists what a user runs, not the commands the daemon
// starts itself (the node resolver).
func TestHelpHidesInternalCommands(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "--help")
	if err != nil || strings.Contains(out, "node-resolver") || !strings.Contains(out, "daemon") {
		t.Fatalf("legion --help: %v\n%s", err, out)
	}
}
