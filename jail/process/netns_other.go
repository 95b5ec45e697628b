//go:build !linux

package process

import (
	"fmt"

	"github.com/legionbsd/legion/jail"
)

// netnsSupported: only Linux has network namespaces.
const netnsSupported = false

func startInNetNS(path string, _ func() (jail.Process, error)) (jail.Process, error) {
	return nil, &jail.StartError{Err: fmt.Errorf("network namespace %s: only Linux has them", path), Permanent: true}
}
