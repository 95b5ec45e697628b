package jail

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// supervisors reaps the supervisors ShimFront.Start starts in this
// process (both runtimes start them so: one exec per container, the
// binary's start-up being most of a container's start), which are its
// children until they end. A goroutine blocked in Wait per container
// would hold an OS thread each, so one goroutine woken by SIGCHLD reaps
// them all. A supervisor started by an earlier daemon is init's child.
var supervisors reaper

type reaper struct {
	mu      sync.Mutex
	pids    map[int]struct{}
	started bool
}

// add has pid, a child of this process, reaped once it ends.
func (r *reaper) add(pid int) {
	r.mu.Lock()
	if r.pids == nil {
		r.pids = map[int]struct{}{}
	}
	r.pids[pid] = struct{}{}
	if !r.started {
		r.started = true
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGCHLD)
		go func() {
			for range sigs {
				r.reap()
			}
		}()
	}
	r.reapLocked(pid) // it may have ended before it was added
	r.mu.Unlock()
}

// reap waits for those of its children that have ended, without blocking.
// Signals coalesce, so each one looks at them all.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.pids {
		r.reapLocked(pid)
	}
}

// reapLocked reaps pid if it has ended; r.mu is held.
func (r *reaper) reapLocked(pid int) {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	if got == pid || errors.Is(err, syscall.ECHILD) {
		delete(r.pids, pid)
	}
}
