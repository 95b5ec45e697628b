package jail_test

import (
	"os"
	"testing"

	"github.com/legionbsd/legion/jail/jailtest"
)

// The jail runtime starts each supervisor itself, `jail-shim supervise`,
// as the process runtime does: one start of the binary per container, no
// front end that exits after starting it. The supervisors are this
// process's children, reaped once they end.
func TestJailSupervisorsAreChildrenReaped(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j := newHostJails(t, exe, nil)
	jailtest.SupervisorsAreChildrenReaped(t, j)
}
