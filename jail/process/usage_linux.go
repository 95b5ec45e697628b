package process

import (
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/legionbsd/legion/internal/procstat"
	"github.com/legionbsd/legion/jail"
)

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
	st  procstat.Stat
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
		u.CPUTime += p.st.CPU()
		u.MemoryBytes += p.st.RSS * page
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
		st, err := procstat.Read(pid)
		if err != nil || st.Zombie {
			continue // gone meanwhile
		}
		by[st.Session] = append(by[st.Session], procEntry{pid: pid, st: st})
	}
	return by, true
}
