package agent

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Node-pressure eviction (design 3.5, 6.3): a task with no memory request
// is scheduled as zero-cost, so a node can be overcommitted; when its
// available memory falls below a threshold the agent stops tasks itself,
// one at a time, rather than leave the kernel's OOM killer to pick a
// victim, possibly a task that reserved its memory. This is kubelet's
// hard eviction on memory.available, in a simple form.

// MemoryReader measures how much memory the node has available for new
// work: free memory plus what the kernel gives back under pressure
// (SysctlMemory on FreeBSD, MemInfo on Linux).
type MemoryReader interface {
	AvailableMemory(ctx context.Context) (int64, error)
}

const (
	// DefaultEvictionMemoryAvailable is the threshold when
	// Agent.EvictionMemoryAvailable is zero: kubelet's default hard
	// eviction signal, memory.available<100Mi.
	DefaultEvictionMemoryAvailable = 100 << 20
	// EvictionOff, as Agent.EvictionMemoryAvailable (as any negative
	// value), turns node-pressure eviction off.
	EvictionOff = -1
	// MemoryCheckInterval is how often the agent measures the node's
	// available memory: as often as the runtime's memory killer counts the
	// containers with a limit (jail.OOMKiller, once a second).
	MemoryCheckInterval = time.Second
	// evictionCleanupWait bounds how long an eviction holds the next one
	// back: the memory is given back only once the pod is gone, so the
	// node is measured again then, as kubelet waits for an evicted pod's
	// cleanup (up to 30 s) before it evicts another.
	evictionCleanupWait = 30 * time.Second
)

// Why a task was evicted: the reason label of the evictions counter.
const (
	EvictedNoRequest   = "no-memory-request"
	EvictedOverRequest = "over-memory-request"
)

// evictionThreshold is the available memory below which tasks are
// evicted; negative when eviction is off.
func (a *Agent) evictionThreshold() int64 {
	switch t := a.EvictionMemoryAvailable; {
	case t == 0:
		return DefaultEvictionMemoryAvailable
	case t < 0:
		return EvictionOff
	default:
		return t
	}
}

// evictionCandidate is a running task as the eviction decision sees it.
type evictionCandidate struct {
	Task    string // namespace/name
	UID     string
	Request int64 // the pod's memory request; 0: none
	Usage   int64 // what its containers use now
	// Unread: none of its containers' memory could be read (Usage is
	// 0). Such a task is evicted only when it requests no memory, after
	// those that could be read.
	Unread bool
}

// reason is why the task may be evicted: it requests no memory, or uses
// more than it requests; empty when it is within its request.
func (c evictionCandidate) reason() string {
	switch {
	case c.Request <= 0:
		return EvictedNoRequest
	case c.Usage > c.Request && !c.Unread:
		return EvictedOverRequest
	}
	return ""
}

// evictionVictim is the task to evict when the node has available bytes
// left and evicts below threshold (negative: never): none while available
// is at or above it. First the tasks that request no memory, the one
// using the most first (those whose use could not be read last); only
// when none is left, the tasks using more than they request, the one
// furthest above first. A task within its request is never chosen. Ties
// go by name, so the choice is the same each time.
func evictionVictim(available, threshold int64, tasks []evictionCandidate) (evictionCandidate, bool) {
	if threshold < 0 || available >= threshold {
		return evictionCandidate{}, false
	}
	var none, over []evictionCandidate
	for _, c := range tasks {
		switch c.reason() {
		case EvictedNoRequest:
			none = append(none, c)
		case EvictedOverRequest:
			over = append(over, c)
		}
	}
	byName := func(a, b evictionCandidate) int { return strings.Compare(a.Task, b.Task) }
	if len(none) > 0 {
		return slices.MinFunc(none, func(a, b evictionCandidate) int {
			return cmp.Or(compareBool(a.Unread, b.Unread), cmp.Compare(b.Usage, a.Usage), byName(a, b))
		}), true
	}
	if len(over) > 0 {
		return slices.MinFunc(over, func(a, b evictionCandidate) int {
			return cmp.Or(cmp.Compare(b.Usage-b.Request, a.Usage-a.Request), byName(a, b))
		}), true
	}
	return evictionCandidate{}, false
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// evictionMessage is the evicted task's message, in the operator's terms.
func evictionMessage(available, threshold int64, c evictionCandidate) string {
	msg := "evicted: node memory available " + formatBytes(available) + " is below " + formatBytes(threshold) + "; "
	switch {
	case c.reason() == EvictedNoRequest && c.Unread:
		return msg + "the task requests no memory (its memory use could not be read)"
	case c.reason() == EvictedNoRequest:
		return msg + "the task requests no memory and used " + formatBytes(c.Usage)
	}
	return msg + "the task used " + formatBytes(c.Usage) + ", " + formatBytes(c.Usage-c.Request) +
		" above its memory request of " + formatBytes(c.Request)
}

// formatBytes writes n in binary units as a quantity reads: 80Mi, 1.2Gi;
// bytes below a Ki as a plain number.
func formatBytes(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10)
	}
	v, u := float64(n)/1024, 0
	for (v >= 1024 || v <= -1024) && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + units[u]
}

// evictionState is what the memory check keeps between ticks. Only the
// check's goroutine (watchMemory) touches it, but for what mu guards,
// which the metrics read.
type evictionState struct {
	mu        sync.Mutex
	available int64             // mu
	measured  bool              // mu
	counts    map[string]uint64 // mu: evictions by reason

	pressure  bool
	readErr   string    // the read failure last logged
	idleNoted bool      // "nothing to evict" said for this pressure
	pending   *worker   // the last evicted task's worker, until its pod is gone
	pendingAt time.Time // when it was evicted
}

// NodeMemory is the node's available memory as the agent last measured
// it, the threshold below which it evicts tasks (negative: eviction off)
// and whether it measured any yet (its metrics).
func (a *Agent) NodeMemory() (available, threshold int64, measured bool) {
	a.ev.mu.Lock()
	defer a.ev.mu.Unlock()
	return a.ev.available, a.evictionThreshold(), a.ev.measured
}

// Evictions counts the tasks this agent evicted under node memory
// pressure, by reason (EvictedNoRequest, EvictedOverRequest), each
// reason present from the start.
func (a *Agent) Evictions() map[string]uint64 {
	a.ev.mu.Lock()
	defer a.ev.mu.Unlock()
	out := map[string]uint64{EvictedNoRequest: 0, EvictedOverRequest: 0}
	maps.Copy(out, a.ev.counts)
	return out
}

// watchMemory checks the node's memory every MemoryCheckEvery until ctx
// ends.
func (a *Agent) watchMemory(ctx context.Context) {
	every := a.MemoryCheckEvery
	if every <= 0 {
		every = MemoryCheckInterval
	}
	a.log.Info("node-pressure eviction on: tasks are evicted while the node's available memory is below the threshold",
		"threshold", formatBytes(a.evictionThreshold()), "every", every)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.checkMemory(ctx)
		}
	}
}

// checkMemory measures the node's available memory once and, below the
// threshold, evicts one task. It returns the evicted task's
// namespace/name, if any.
func (a *Agent) checkMemory(ctx context.Context) string {
	threshold := a.evictionThreshold()
	ev := &a.ev
	available, err := a.Memory.AvailableMemory(ctx)
	ev.mu.Lock()
	ev.available, ev.measured = available, err == nil
	ev.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && err.Error() != ev.readErr {
			a.log.Warn("cannot measure the node's available memory: no task is evicted until it can", "err", err)
			ev.readErr = err.Error()
		}
		return ""
	}
	if ev.readErr != "" {
		a.log.Info("the node's available memory can be measured again", "available", formatBytes(available))
		ev.readErr = ""
	}
	if threshold < 0 {
		return ""
	}
	under := available < threshold
	switch {
	case under && !ev.pressure:
		a.log.Warn("node under memory pressure: evicting tasks that request no memory, then tasks above their memory request",
			"available", formatBytes(available), "threshold", formatBytes(threshold))
	case !under && ev.pressure:
		a.log.Info("node memory pressure is over", "available", formatBytes(available), "threshold", formatBytes(threshold))
		ev.idleNoted = false
	}
	if under != ev.pressure && a.PressureChanged != nil {
		a.PressureChanged(under)
	}
	ev.pressure = under
	if !under {
		return ""
	}
	// One eviction at a time: the next is decided on what the node has
	// once the last evicted pod is gone.
	if w := ev.pending; w != nil {
		select {
		case <-w.done:
		default:
			if a.now().Sub(ev.pendingAt) < evictionCleanupWait {
				return ""
			}
		}
		ev.pending = nil
	}
	cands, workers := a.evictionCandidates(ctx)
	victim, ok := evictionVictim(available, threshold, cands)
	if !ok {
		if !ev.idleNoted {
			unread := 0
			for _, c := range cands {
				if c.Unread {
					unread++
				}
			}
			a.log.Warn("node under memory pressure, but no running task may be evicted: each is within its memory request, or requests memory and its use could not be read",
				"available", formatBytes(available), "threshold", formatBytes(threshold), "tasks", len(cands), "unread", unread)
			ev.idleNoted = true
		}
		return ""
	}
	w := workers[victim.UID]
	if !w.evicted.CompareAndSwap(false, true) {
		return ""
	}
	msg := evictionMessage(available, threshold, victim)
	a.log.Warn("evicting a task: node under memory pressure", "task", victim.Task, "reason", victim.reason(),
		"available", formatBytes(available), "threshold", formatBytes(threshold),
		"used", formatBytes(victim.Usage), "request", formatBytes(victim.Request))
	w.evict <- msg // buffered, and sent once (evicted)
	ev.mu.Lock()
	if ev.counts == nil {
		ev.counts = map[string]uint64{}
	}
	ev.counts[victim.reason()]++
	ev.mu.Unlock()
	ev.pending, ev.pendingAt = w, a.now()
	ev.idleNoted = false
	return victim.Task
}

// evictionCandidates are the tasks running here, with what their
// containers use now, and their workers by task uid. A task starting,
// stopping or already evicted is left out.
func (a *Agent) evictionCandidates(ctx context.Context) ([]evictionCandidate, map[string]*worker) {
	a.mu.Lock()
	var ws []*worker
	for _, w := range a.workers {
		if w.supervising.Load() && !w.evicted.Load() && !w.stopping() {
			ws = append(ws, w)
		}
	}
	a.mu.Unlock()
	var out []evictionCandidate
	byUID := map[string]*worker{}
	for _, w := range ws {
		t := w.task
		var used int64
		read := false
		for _, c := range t.Spec.Pod.Containers {
			u, err := a.Runtime.Usage(ctx, containerID(t, c.Name))
			if err != nil {
				a.log.Debug("container memory for eviction", "task", t.Metadata.Name, "container", c.Name, "err", err)
				continue
			}
			used += u.MemoryBytes
			read = true
		}
		out = append(out, evictionCandidate{Task: t.Metadata.Namespace + "/" + t.Metadata.Name, UID: t.Metadata.UID,
			Request: int64(t.Spec.Pod.Requests().Memory), Usage: used, Unread: !read})
		byUID[t.Metadata.UID] = w
	}
	return out, byUID
}
