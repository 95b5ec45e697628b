package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestCommitOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}}, "0123456789ab"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}, "abc+changes"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, "unknown"},
	} {
		if got := commitOf(c.settings); got != c.want {
			t.Errorf("commitOf(%v) = %q, want %q", c.settings, got, c.want)
		}
	}
}

// A build's ID names its release, and without a stamped commit (a test
// binary) its executable's size and time, so that two builds differ.
func TestIDTellsBuildsApart(t *testing.T) {
	id := ID()
	if !strings.HasPrefix(id, Version+" ") {
		t.Fatalf("ID %q does not start with the release %s", id, Version)
	}
	if Commit() == "unknown" && !strings.Contains(id, "@") {
		t.Errorf("ID %q of a build without a commit names no executable", id)
	}
}
