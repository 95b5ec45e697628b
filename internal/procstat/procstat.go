// Package procstat reads Linux's /proc/<pid>/stat: what a process has
// used (CPU time, resident pages), whether it is a zombie, and its
// parent and session. The process platform counts a container's usage
// and finds its reaped processes from it (jail/process); tests find
// their processes' children, and benchmarks the CPU that servers run as
// processes of their own spend (etcd, dnsmasq, nginx and Legion's own).
package procstat

import (
	"fmt"
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
	Parent       int
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
	s := Stat{Zombie: f[0] == "Z", Parent: int(num(4)), Session: int(num(6)), Utime: num(14), Stime: num(15), RSS: num(24)}
	return s, ok
}

// Read reads process pid's stat. Its error is the file's as os.ReadFile
// gives it (fs.ErrNotExist when the process is gone, or the host has no
// Linux /proc, as FreeBSD without linprocfs), or says the line is not a
// stat line.
func Read(pid int) (Stat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	data, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	s, ok := Parse(string(data))
	if !ok {
		return Stat{}, fmt.Errorf("%s: not a stat line: %q", path, data)
	}
	return s, nil
}

// CPUTime is the CPU the processes have used together; false when any
// cannot be read.
func CPUTime(pids ...int) (time.Duration, bool) {
	var total time.Duration
	for _, pid := range pids {
		s, err := Read(pid)
		if err != nil {
			return 0, false
		}
		total += s.CPU()
	}
	return total, true
}
