package agent

import (
	"context"
	"sync"
	"time"

	"github.com/legionbsd/legion"
)

// A task directory whose Volumes could not be detached (a device still
// busy, an NFS server not answering) is tried again while the agent
// runs: after DetachRetryFirst, twice as long after each failure in a
// row, never more than DetachRetryMax apart. Until then the Volumes stay
// held by this node, so no other node can take them.
const (
	DetachRetryFirst = 10 * time.Second
	DetachRetryMax   = 5 * time.Minute
)

// detachRetries are the task directories whose detach failed, by task
// uid, each with its next try.
type detachRetries struct {
	mu      sync.Mutex
	pending map[string]*pendingDetach
	wake    chan struct{} // buffered, 1: a directory was added
	// idle is signalled when a directory an earlier agent left was
	// detached: followLocalCopies lets go of what it held then
	// (releaseIdle), not only at the next assignment set.
	idle chan struct{} // buffered, 1
}

// pendingDetach is a directory to detach again. task is the task it
// belonged to, whose Volumes the agent let go of once detached; nil for
// a directory an earlier agent left, whose Volumes this agent never
// held (releaseIdle lets go of them once no record names them).
type pendingDetach struct {
	task  *legion.Task
	fails int
	next  time.Time
}

// retryDetach queues the directory of the task uid (task may be nil) for
// another detach.
func (a *Agent) retryDetach(uid string, task *legion.Task) {
	r := &a.detaches
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]*pendingDetach{}
	}
	if _, ok := r.pending[uid]; !ok {
		r.pending[uid] = &pendingDetach{task: task, fails: 1, next: time.Now().Add(a.detachDelay(1))}
	}
	r.mu.Unlock()
	wake, _ := r.chans()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// chans are wake and idle, made on first use: a directory may be queued
// before Run starts the goroutines that take them.
func (r *detachRetries) chans() (wake, idle chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wake == nil {
		r.wake, r.idle = make(chan struct{}, 1), make(chan struct{}, 1)
	}
	return r.wake, r.idle
}

// detachDelay is the wait after fails failures in a row.
func (a *Agent) detachDelay(fails int) time.Duration {
	d := a.DetachRetry
	if d <= 0 {
		d = DetachRetryFirst
	}
	for i := 1; i < fails && d < DetachRetryMax; i++ {
		d *= 2
	}
	return min(d, DetachRetryMax)
}

// followDetaches tries the queued directories again as they fall due,
// until ctx ends.
func (a *Agent) followDetaches(ctx context.Context) {
	r := &a.detaches
	wake, _ := r.chans()
	for {
		now := time.Now()
		var due []string
		next := time.Time{}
		r.mu.Lock()
		for uid, p := range r.pending {
			switch {
			case !p.next.After(now):
				due = append(due, uid)
			case next.IsZero() || p.next.Before(next):
				next = p.next
			}
		}
		r.mu.Unlock()
		for _, uid := range due {
			a.detachAgain(ctx, uid)
		}
		if len(due) > 0 {
			continue // what failed again has a new time
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// detachAgain tries one queued directory: detached, the task's Volumes
// are let go of and the directory goes; else its next try is later.
func (a *Agent) detachAgain(ctx context.Context, uid string) {
	r := &a.detaches
	r.mu.Lock()
	p := r.pending[uid]
	r.mu.Unlock()
	if p == nil {
		return
	}
	var ok bool
	if p.task != nil {
		ok = a.releaseVolumes(ctx, p.task)
	} else {
		ok = a.detachDir(ctx, uid)
	}
	r.mu.Lock()
	if !ok {
		p.fails++
		p.next = time.Now().Add(a.detachDelay(p.fails))
		r.mu.Unlock()
		return
	}
	delete(r.pending, uid)
	r.mu.Unlock()
	a.log.Info("detached the volumes of a task on a later try", "task", uid, "tries", p.fails+1)
	a.removeTaskDir(ctx, uid)
	if p.task == nil {
		_, idle := r.chans()
		select {
		case idle <- struct{}{}:
		default:
		}
	}
}
