package sessions

import (
	"testing"

	"github.com/legionbsd/legion"
)

// Only a ZFS snapshot is the data at one instant; a directory's copy is
// said to be file by file.
func TestBackupConsistencyFollowsTheStream(t *testing.T) {
	for form, want := range map[string]string{"zfs": legion.ConsistencyCrash, "dir": legion.ConsistencyFiles} {
		if got := consistencyOf(form); got != want {
			t.Errorf("consistency of a %s stream: %q, want %q", form, got, want)
		}
	}
}
