//go:build !linux

package process

import "github.com/legionbsd/legion/jail"

// sessionTable has no /proc to read here.
type sessionTable struct{}

func (*sessionTable) usage(int) (jail.Usage, bool) { return jail.Usage{}, false }
