package legion

import (
	"slices"
	"strings"
)

// stopSignals are the signals a container may be stopped with, by their
// canonical names: only signals FreeBSD has (signal(3)), since the agent
// must send them there, and Linux too, for the process platform.
var stopSignals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGWINCH", "SIGSTOP"}

// StopSignals lists the canonical names ParseStopSignal accepts.
func StopSignals() []string { return slices.Clone(stopSignals) }

// ParseStopSignal reads a stop signal written in any accepted spelling,
// in any case, with or without SIG (quit, SIGQUIT), and returns its
// canonical name (SIGQUIT). Admission stores that name and the agent
// reads the same table, so they never disagree.
func ParseStopSignal(s string) (string, bool) {
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	if !slices.Contains(stopSignals, u) {
		return "", false
	}
	return u, true
}
