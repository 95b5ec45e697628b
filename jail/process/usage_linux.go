package process

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion/jail"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times; it
// is 100 on every architecture Go supports.
const clockTicks = 100

// sessionUsage sums /proc over the processes of session sid.
func sessionUsage(sid int) (jail.Usage, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return jail.Usage{}, false
	}
	page := int64(os.Getpagesize())
	var u jail.Usage
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		st, ok := parseStat(string(data))
		if !ok || st.session != sid || st.zombie {
			continue
		}
		u.Processes++
		u.CPUTime += time.Duration(st.utime+st.stime) * time.Second / clockTicks
		u.MemoryBytes += st.rss * page
		if fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd"); err == nil {
			u.OpenFiles += int64(len(fds))
		}
	}
	return u, true
}

type procStat struct {
	zombie       bool
	session      int
	utime, stime int64
	rss          int64 // pages
}

// parseStat reads /proc/<pid>/stat; the command name may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStat(s string) (procStat, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(n int) int64 {
		v, _ := strconv.ParseInt(f[n-3], 10, 64)
		return v
	}
	return procStat{zombie: f[0] == "Z", session: int(num(6)), utime: num(14), stime: num(15), rss: num(24)}, true
}
