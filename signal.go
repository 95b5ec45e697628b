package legion

import (
	"slices"
	"strconv"
	"strings"
)

// stopSignals are the signals a container may be stopped with, by their
// canonical names: only signals FreeBSD has (signal(3)), since the agent
// must send them there, and Linux too, for the process platform.
var stopSignals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGWINCH", "SIGSTOP"}

// numberedAlike are the stop signals FreeBSD and Linux give the same
// number, which a manifest or an image's STOPSIGNAL may use for them
// (Docker takes "9"). Other numbers mean different signals on the two
// (10 is Linux's SIGUSR1 and FreeBSD's SIGBUS), so they are refused.
var numberedAlike = map[string]string{"1": "SIGHUP", "2": "SIGINT", "3": "SIGQUIT", "9": "SIGKILL", "15": "SIGTERM", "28": "SIGWINCH"}

// MaxRealtimeOffset is how far from SIGRTMIN up, or from SIGRTMAX down, a
// stop signal may be named (SIGRTMIN+3, systemd's): within the realtime
// signals both platforms have, Linux's 31 (34 to 64, those its C library
// leaves to programs) and FreeBSD's 62 (65 to 126).
const MaxRealtimeOffset = 30

// StopSignals lists the canonical names ParseStopSignal accepts, the
// realtime signals aside.
func StopSignals() []string { return slices.Clone(stopSignals) }

// stopSignalsExpected says what ParseStopSignal accepts, for errors.
func stopSignalsExpected() string {
	var names, numbers []string
	for _, name := range stopSignals { // in numberedAlike's, by number
		for n, named := range numberedAlike {
			if named == name {
				names, numbers = append(names, name), append(numbers, n)
			}
		}
	}
	return "one of " + strings.Join(stopSignals, ", ") + ", SIGRTMIN+n or SIGRTMAX-n (n up to " +
		strconv.Itoa(MaxRealtimeOffset) + "), or the number of " + strings.Join(names, ", ") + " (" + strings.Join(numbers, ", ") + ")"
}

// ParseStopSignal reads a stop signal written in any accepted spelling,
// in any case, with or without SIG (quit, SIGQUIT), or by a number both
// platforms agree on (3), and returns its canonical name (SIGQUIT; a
// realtime one as SIGRTMIN, SIGRTMIN+3, SIGRTMAX-2). Admission stores
// that name and the agent reads the same table, so they never disagree.
func ParseStopSignal(s string) (string, bool) {
	if name, ok := numberedAlike[strings.TrimSpace(s)]; ok {
		return name, true
	}
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	if slices.Contains(stopSignals, u) {
		return u, true
	}
	if fromMin, n, ok := parseRealtime(u); ok {
		return realtimeName(fromMin, n), true
	}
	return "", false
}

// RealtimeStopSignal reports whether a canonical stop signal name is a
// realtime signal, and which: n above SIGRTMIN (fromMin) or below
// SIGRTMAX. The agent turns it into its platform's number.
func RealtimeStopSignal(name string) (fromMin bool, n int, ok bool) {
	fromMin, n, ok = parseRealtime(name)
	if !ok || realtimeName(fromMin, n) != name {
		return false, 0, false
	}
	return fromMin, n, true
}

// parseRealtime reads SIGRTMIN, SIGRTMIN+n, SIGRTMAX and SIGRTMAX-n (upper
// case, with SIG), n up to MaxRealtimeOffset.
func parseRealtime(u string) (fromMin bool, n int, ok bool) {
	rest, fromMin := strings.CutPrefix(u, "SIGRTMIN")
	sign := "+"
	if !fromMin {
		var isMax bool
		if rest, isMax = strings.CutPrefix(u, "SIGRTMAX"); !isMax {
			return false, 0, false
		}
		sign = "-"
	}
	if rest == "" {
		return fromMin, 0, true
	}
	digits, ok := strings.CutPrefix(rest, sign)
	if !ok || digits == "" || len(digits) > 2 || strings.Trim(digits, "0123456789") != "" {
		return false, 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > MaxRealtimeOffset {
		return false, 0, false
	}
	return fromMin, n, true
}

func realtimeName(fromMin bool, n int) string {
	name, sign := "SIGRTMAX", "-"
	if fromMin {
		name, sign = "SIGRTMIN", "+"
	}
	if n == 0 {
		return name
	}
	return name + sign + strconv.Itoa(n)
}
