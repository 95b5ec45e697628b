// Package procstat reads Linux's /proc/<pid>/stat: what a process has
// used (CPU time, resident pages) and the session it belongs to. The
// process platform counts a container's usage from it (jail/process), and
// benchmarks the CPU that servers run as processes of their own spend
// (etcd, dnsmasq, nginx and Legion's own).
package procstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is Linux's USER_HZ, the unit of the file's times; it is 100
// on every architecture Go supports.
const ClockTicks = 100

// Stat is what Legion reads of a process's stat file.
type Stat struct {
	Zombie       bool
	Session      int
	Utime, Stime int64 // in ClockTicks
	RSS          int64 // pages
}

// CPU is the user and system time the process has used, every thread
// counted.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.Utime+s.Stime) * time.Second / ClockTicks
}

// Parse reads a stat line. The command name, in parentheses, may hold
// spaces and parentheses, so fields are counted after its last ')'.
func Parse(line string) (Stat, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return Stat{}, false
	}
	ok := true
	num := func(n int) int64 {
		v, err := strconv.ParseInt(f[n-3], 10, 64)
		ok = ok && err == nil
		return v
	}
	s := Stat{Zombie: f[0] == "Z", Session: int(num(6)), Utime: num(14), Stime: num(15), RSS: num(24)}
	return s, ok
}

// Read reads process pid's stat; false when it is gone or the host has
// no Linux /proc (FreeBSD without linprocfs).
func Read(pid int) (Stat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return Parse(string(data))
}

// CPUTime is the CPU the processes have used together; false when any
// cannot be read.
func CPUTime(pids ...int) (time.Duration, bool) {
	var total time.Duration
	for _, pid := range pids {
		s, ok := Read(pid)
		if !ok {
			return 0, false
		}
		total += s.CPU()
	}
	return total, true
}
