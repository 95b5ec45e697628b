//go:build !linux

package process

import "github.com/legionbsd/legion/jail"

// sessionUsage has no /proc to read here.
func sessionUsage(int) (jail.Usage, bool) { return jail.Usage{}, false }
