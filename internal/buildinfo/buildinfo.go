// Package buildinfo says which build of Legion is running: the CLI prints
// it and managers report it in their status, so a client can tell its own
// build from the cluster's.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, set at build time with
// -ldflags "-X github.com/legionbsd/legion/internal/buildinfo.Version=...".
var Version = "0.1.0-dev"

// Commit is the VCS revision the binary was built from, as the go command
// stamped it, with "+changes" for a dirty tree ("unknown" when it did not
// stamp one: go run, -buildvcs=false).
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return commitOf(info.Settings)
}

func commitOf(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+changes"
	}
	return rev
}

// GoVersion is the Go release that built the binary.
func GoVersion() string { return runtime.Version() }
