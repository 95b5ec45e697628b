package process

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legionbsd/legion/jail"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times; it
// is 100 on every architecture Go supports.
const clockTicks = 100

// sessionTable reads /proc once for every container's usage asked within
// sessionScanFresh: the node samples all its containers at each
// heartbeat, and a pass over /proc per container made each sample cost
// containers × processes reads (3 million at 1,000 pods).
type sessionTable struct {
	mu sync.Mutex
	at time.Time
	ok bool
	by map[int][]procEntry // by session id
	// scan is scanSessions when nil.
	scan func() (map[int][]procEntry, bool)
}

// sessionScanFresh is how long one pass over /proc answers for.
const sessionScanFresh = 500 * time.Millisecond

type procEntry struct {
	pid int
	st  procStat
}

// usage sums what the processes of session sid use, from a pass over
// /proc at most sessionScanFresh old.
func (t *sessionTable) usage(sid int) (jail.Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Host time: what is cached is the host's processes.
	now := time.Now()
	if t.by == nil || now.Sub(t.at) >= sessionScanFresh || now.Before(t.at) {
		scan := t.scan
		if scan == nil {
			scan = scanSessions
		}
		t.by, t.ok = scan()
		t.at = now
	}
	if !t.ok {
		return jail.Usage{}, false
	}
	page := int64(os.Getpagesize())
	var u jail.Usage
	for _, p := range t.by[sid] {
		u.Processes++
		u.CPUTime += time.Duration(p.st.utime+p.st.stime) * time.Second / clockTicks
		u.MemoryBytes += p.st.rss * page
		// Open files are counted for the session asked only.
		if fds, err := os.ReadDir("/proc/" + strconv.Itoa(p.pid) + "/fd"); err == nil {
			u.OpenFiles += int64(len(fds))
		}
	}
	return u, true
}

// scanSessions reads every process's stat, by session; zombies are left
// out.
func scanSessions() (map[int][]procEntry, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	by := map[int][]procEntry{}
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
		if !ok || st.zombie {
			continue
		}
		by[st.session] = append(by[st.session], procEntry{pid: pid, st: st})
	}
	return by, true
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
