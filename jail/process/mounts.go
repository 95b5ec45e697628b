package process

import (
	"path/filepath"

	"github.com/legionbsd/legion/jail"
)

// mountable reports whether the runtime makes mounts in this container's
// root: only as root (chrooted containers see nothing else) and never
// when the root is the host's own tree, whose /dev and paths are the
// host's.
func mountable(rec jail.Record, euid int) bool {
	return euid == 0 && !rec.Spec.Infra && filepath.Clean(rec.Spec.Root.Path) != "/"
}
