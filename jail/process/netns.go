package process

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/legionbsd/legion/jail"
)

// nsStarter starts a container's processes in the spec's network
// namespace, when it names one, and as HostStarter does otherwise.
type nsStarter struct{ host jail.HostStarter }

// Start implements jail.Starter.
func (s nsStarter) Start(p jail.ProcSpec) (jail.Process, error) {
	if p.NetNS == "" {
		return s.host.Start(p)
	}
	return startInNetNS(p.NetNS, func() (jail.Process, error) { return s.host.Start(p) })
}

// checkNetNS refuses a network namespace this host cannot enter: one
// that is not an absolute path, or any where namespaces are not Linux's.
func checkNetNS(spec jail.ContainerSpec) error {
	if spec.NetNS == "" {
		return nil
	}
	if !netnsSupported {
		return fmt.Errorf("container spec %s: netns %q: network namespaces are Linux's; this host has none", spec.ID, spec.NetNS)
	}
	if !filepath.IsAbs(spec.NetNS) {
		return fmt.Errorf("container spec %s: netns %q: expected the absolute path of a namespace file", spec.ID, spec.NetNS)
	}
	if _, err := os.Stat(spec.NetNS); err != nil {
		return fmt.Errorf("container spec %s: netns: %w", spec.ID, err)
	}
	return nil
}
