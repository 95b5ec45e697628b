package jail_test

import (
	"os"
	"testing"

	"github.com/legionbsd/legion/jail"
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
	jailtest.SupervisorsAreChildrenReaped(t, j, func(id string) jail.ContainerSpec {
		return jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", "sleep 600 & wait"},
			ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}}
	})
}
