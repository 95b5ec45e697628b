package netbsd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// GuardDeadline is how long a new pod may wait for its guard: a pod not
// guarded by then fails, so a node whose pf cannot take the policy runs no
// new pods rather than unguarded ones.
const GuardDeadline = time.Minute

// GuardWaitReason is the task status message while a pod waits.
const GuardWaitReason = "loading the pod's network policy"

// ErrNotGuarded is returned when a pod's guard was not loaded in time.
var ErrNotGuarded = errors.New("pod network policy not loaded")

// Clock is the time source guards wait on; tests inject a fake.
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// After implements Clock.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Guards records which pod addresses the loaded legion/policy anchor
// guards, so a new pod's containers are held until its guard is in pf.
type Guards struct {
	clock Clock

	mu      sync.Mutex
	guarded map[netip.Addr]bool
	waiters map[netip.Addr]chan struct{}
}

// NewGuards returns an empty record waiting on clock.
func NewGuards(clock Clock) *Guards {
	return &Guards{clock: clock, guarded: make(map[netip.Addr]bool), waiters: make(map[netip.Addr]chan struct{})}
}

// Set records that the loaded anchor guards exactly these addresses.
func (g *Guards) Set(addrs []netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		next[a] = true
		if ch, ok := g.waiters[a]; ok {
			close(ch)
			delete(g.waiters, a)
		}
	}
	g.guarded = next
}

// Guarded reports whether a pod address is guarded now.
func (g *Guards) Guarded(a netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.guarded[a]
}

// Wait returns once the pod at a is guarded, or ErrNotGuarded after
// GuardDeadline, or the context's error.
func (g *Guards) Wait(ctx context.Context, a netip.Addr) error {
	g.mu.Lock()
	if g.guarded[a] {
		g.mu.Unlock()
		return nil
	}
	ch, ok := g.waiters[a]
	if !ok {
		ch = make(chan struct{})
		g.waiters[a] = ch
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-g.clock.After(GuardDeadline):
		return fmt.Errorf("pod %s: %w within %s", a, ErrNotGuarded, GuardDeadline)
	case <-ctx.Done():
		return ctx.Err()
	}
}
