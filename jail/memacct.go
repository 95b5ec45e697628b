package jail

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/legionbsd/legion/sys"
)

// The memory count of 6.3. rctl's memoryuse sums each process's resident
// pages, so pages shared between a container's processes count once per
// process (Postgres's shared buffers times its sessions). The count here
// takes every page once: anonymous memory by VM object, following the
// chain of objects behind each mapping (a forked child's copy-on-write
// pages sit in an object shared with its parent behind one of its own);
// file memory by file and mapped range; SysV and POSIX shared memory, for
// which the map names no object, by name, and anonymous POSIX segments,
// all of one name, by name and address, which a fork keeps.

// Mapping kinds.
const (
	MapAnon     = "anon"     // default/swap object: counted by object chain
	MapFile     = "file"     // vnode: counted by file and range
	MapSysV     = "sysv"     // SysV shared memory: by name (key)
	MapPosixShm = "posixshm" // POSIX shared memory: by name; anonymous ones by address too
	MapOther    = "other"    // device, physical, guard: not counted
)

// Mapping is one entry of a process's map (kern.proc.vmmap).
type Mapping struct {
	Start    uint64 `json:"start"`
	End      uint64 `json:"end"`
	Kind     string `json:"kind"`
	Object   uint64 `json:"object,omitempty"` // the VM object (kve_obj), for anon
	File     string `json:"file,omitempty"`   // fsid:fileid, for file
	Offset   uint64 `json:"offset,omitempty"` // in the file
	Name     string `json:"name,omitempty"`   // shared memory's name; "" or SHM_ANON for anonymous
	Resident uint64 `json:"resident"`         // resident pages of this mapping
}

// ProcessMap is one process of a container with its map.
type ProcessMap struct {
	Pid  int       `json:"pid"`
	Maps []Mapping `json:"maps"`
}

// VMObject is an anonymous object (vm.swap_objects): its resident pages
// and the object behind it.
type VMObject struct {
	Addr     uint64 `json:"addr"`
	Backing  uint64 `json:"backing,omitempty"`
	Resident uint64 `json:"resident"`
}

// MemoryCount is a container's memory, each page once.
type MemoryCount struct {
	Bytes int64 `json:"bytes"`
	// Own is each process's memory no other process of the container
	// shares: what killing it frees.
	Own map[int]int64 `json:"own"`
}

// CountMemory counts a container's memory from its processes' maps and
// the anonymous objects, with pageSize bytes per page.
func CountMemory(procs []ProcessMap, objects []VMObject, pageSize int64) MemoryCount {
	byAddr := make(map[uint64]VMObject, len(objects))
	for _, o := range objects {
		byAddr[o.Addr] = o
	}
	// Each counted unit (an object, a file range, a segment) with its
	// pages and the processes using it.
	type unit struct {
		pages uint64
		users map[int]bool
	}
	units := map[string]*unit{}
	use := func(key string, pages uint64, pid int) {
		u := units[key]
		if u == nil {
			u = &unit{pages: pages, users: map[int]bool{}}
			units[key] = u
		}
		if pages > u.pages {
			u.pages = pages // several mappings of one range: the most seen resident
		}
		u.users[pid] = true
	}
	for _, p := range procs {
		for _, m := range p.Maps {
			switch m.Kind {
			case MapAnon:
				if m.Object == 0 {
					use("anon-range:"+strconv.Itoa(p.Pid)+":"+strconv.FormatUint(m.Start, 16), m.Resident, p.Pid)
					continue
				}
				seen := map[uint64]bool{}
				for addr := m.Object; addr != 0 && !seen[addr]; {
					seen[addr] = true
					o, ok := byAddr[addr]
					if !ok {
						// Not in the table (not swap-backed): the mapping's own
						// count stands for the first object only.
						if addr == m.Object {
							use("obj:"+strconv.FormatUint(addr, 16), m.Resident, p.Pid)
						}
						break
					}
					use("obj:"+strconv.FormatUint(addr, 16), o.Resident, p.Pid)
					addr = o.Backing
				}
			case MapFile:
				key := fmt.Sprintf("file:%s:%x:%x", m.File, m.Offset, m.End-m.Start)
				use(key, m.Resident, p.Pid)
			case MapSysV:
				use("sysv:"+m.Name, m.Resident, p.Pid)
			case MapPosixShm:
				key := "posix:" + m.Name
				if m.Name == "" || m.Name == "SHM_ANON" {
					key += ":" + strconv.FormatUint(m.Start, 16)
				}
				use(key, m.Resident, p.Pid)
			}
		}
	}
	c := MemoryCount{Own: map[int]int64{}}
	for _, p := range procs {
		c.Own[p.Pid] = 0
	}
	for _, u := range units {
		b := int64(u.pages) * pageSize
		c.Bytes += b
		if len(u.users) == 1 {
			for pid := range u.users {
				c.Own[pid] += b
			}
		}
	}
	return c
}

// OOMVictim picks the process to kill in a container over its limit: the
// one with the most memory of its own (the younger, higher pid, on a tie).
// ok is false when the container is within its limit.
func OOMVictim(limit int64, c MemoryCount) (pid int, ok bool) {
	if limit <= 0 || c.Bytes <= limit || len(c.Own) == 0 {
		return 0, false
	}
	pids := make([]int, 0, len(c.Own))
	for p := range c.Own {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	best := pids[0]
	for _, p := range pids[1:] {
		if c.Own[p] >= c.Own[best] {
			best = p
		}
	}
	return best, true
}

// VMSource reads a jail's process maps and the anonymous objects; on
// FreeBSD from kern.proc.vmmap and vm.swap_objects.
type VMSource interface {
	JailMaps(ctx context.Context, jailName string) ([]ProcessMap, error)
	SwapObjects(ctx context.Context) ([]VMObject, error)
	PageSize() int64
}

// VMCounter is the MemoryCounter of 6.3 over a VMSource.
type VMCounter struct{ Source VMSource }

// Count counts one jail.
func (v VMCounter) Count(ctx context.Context, jailName string) (MemoryCount, error) {
	procs, err := v.Source.JailMaps(ctx, jailName)
	if err != nil {
		return MemoryCount{}, fmt.Errorf("memory of jail %s: %w", jailName, err)
	}
	objs, err := v.Source.SwapObjects(ctx)
	if err != nil {
		return MemoryCount{}, fmt.Errorf("memory of jail %s: %w", jailName, err)
	}
	return CountMemory(procs, objs, v.Source.PageSize()), nil
}

// JailMemory implements MemoryCounter.
func (v VMCounter) JailMemory(ctx context.Context, jailName string) (int64, error) {
	c, err := v.Count(ctx, jailName)
	return c.Bytes, err
}

// Limited is a container with a memory limit, watched by the OOM loop.
type Limited struct {
	Jail  string
	Limit int64
}

// OOMKiller kills, once a second, the largest process of each container
// over its memory limit, as Linux's OOM killer does in a container. The
// rctl rule memoryuse:sigkill=<limit>/process stays as the backstop when
// the count cannot be read.
type OOMKiller struct {
	Clock      Clock
	Interval   time.Duration // one second when zero
	Containers func(ctx context.Context) []Limited
	Count      func(ctx context.Context, jailName string) (MemoryCount, error)
	Runner     sys.Runner // kills with kill -s KILL <pid>
	Log        *slog.Logger
}

// Tick measures every limited container once and kills where over; it
// returns the pids killed.
func (o *OOMKiller) Tick(ctx context.Context) []int {
	var killed []int
	for _, c := range o.Containers(ctx) {
		count, err := o.Count(ctx, c.Jail)
		if err != nil {
			o.log().Warn("memory count failed; the rctl backstop holds", "jail", c.Jail, "err", err)
			continue
		}
		pid, over := OOMVictim(c.Limit, count)
		if !over {
			continue
		}
		o.log().Warn("container over its memory limit: killing its largest process",
			"jail", c.Jail, "bytes", count.Bytes, "limit", c.Limit, "pid", pid, "own", count.Own[pid])
		if _, err := sys.Run(ctx, o.Runner, "kill", "-s", "KILL", strconv.Itoa(pid)); err != nil && !sys.IsExit(err, "No such process") {
			o.log().Warn("kill failed", "jail", c.Jail, "pid", pid, "err", err)
			continue
		}
		killed = append(killed, pid)
	}
	return killed
}

func (o *OOMKiller) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// OOMKiller is the runtime's memory killer over src: it watches the
// running containers with a memory limit (Limited), counts each with
// src, and kills through the runtime's Runner on its clock.
func (j *Jails) OOMKiller(src VMSource) *OOMKiller {
	return &OOMKiller{Clock: j.clock, Containers: j.Limited, Count: VMCounter{Source: src}.Count,
		Runner: j.cfg.Runner, Log: j.log}
}

// Run ticks until ctx ends.
func (o *OOMKiller) Run(ctx context.Context) {
	clock, every := o.Clock, o.Interval
	if clock == nil {
		clock = RealClock{}
	}
	if every == 0 {
		every = time.Second
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(every):
			if ctx.Err() != nil {
				return
			}
			o.Tick(ctx)
		}
	}
}
