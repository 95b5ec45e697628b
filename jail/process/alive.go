package process

import "github.com/legionbsd/legion/jail"

// processAlive reports whether pid runs. A zombie does not: a supervisor
// that died waits, as a zombie, for init to reap it, and some inits (in
// containers and VMs) take their time.
func processAlive(pid int) bool {
	if !jail.ProcessAlive(pid) {
		return false
	}
	return !zombie(pid)
}
