package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/sys"
)

// roleSwitch is a manager's role the test changes.
type roleSwitch struct {
	mu              sync.Mutex
	manager, leader bool
}

func (r *roleSwitch) set(manager, leader bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manager, r.leader = manager, leader
}

func (r *roleSwitch) get() (bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manager, r.leader
}

// has says whether a command starting with prefix was run.
func has(f *sys.Fake, prefix string) bool {
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// The CARP loop through a manager's life: nothing held before the node is
// a manager; the follower's skew once it is one; master forced as soon as
// it leads; the follower's skew again when it stops leading; the address
// given up when the daemon stops.
func TestCARPLoopFollowsTheRole(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	c := netbsd.CARP{Runner: f, Interface: "em0", Addr: netip.MustParseAddr("192.0.2.50"), VHID: 3, Password: "pw"}
	role := &roleSwitch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		carpLoop{c: c, role: role.get, poll: 5 * time.Millisecond, refresh: time.Hour, log: slog.New(slog.DiscardHandler)}.run(ctx)
	}()

	role.set(true, false)
	poll(t, "the follower's skew", 5*time.Second, func() bool { return has(f, "ifconfig em0 vhid 3 advskew 100 pass pw") })
	if has(f, "ifconfig em0 vhid 3 state master") {
		t.Fatal("a follower forced itself master")
	}
	f.Reset()
	role.set(true, true)
	poll(t, "master forced on leading", 5*time.Second, func() bool {
		return has(f, "ifconfig em0 vhid 3 advskew 0 pass pw") && has(f, "ifconfig em0 vhid 3 state master")
	})
	f.Reset()
	role.set(true, false)
	poll(t, "the follower's skew again", 5*time.Second, func() bool { return has(f, "ifconfig em0 vhid 3 advskew 100 pass pw") })
	cancel()
	<-done
	if !has(f, "ifconfig em0 inet 192.0.2.50 -alias") {
		t.Fatalf("the address was not given up at stop:\n%s", strings.Join(f.Lines(), "\n"))
	}
}

// A worker's daemon (or a manager demoted) holds nothing, and gives up an
// address it held.
func TestCARPLoopHoldsNothingOffAManager(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	c := netbsd.CARP{Runner: f, Interface: "em0", Addr: netip.MustParseAddr("192.0.2.50"), VHID: 3, Password: "pw"}
	role := &roleSwitch{manager: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		carpLoop{c: c, role: role.get, poll: 5 * time.Millisecond, refresh: time.Hour, log: slog.New(slog.DiscardHandler)}.run(ctx)
	}()
	poll(t, "held as a manager", 5*time.Second, func() bool { return has(f, "ifconfig em0 vhid 3") })
	role.set(false, false)
	poll(t, "released off a manager", 5*time.Second, func() bool { return has(f, "ifconfig em0 inet 192.0.2.50 -alias") })
	f.Reset()
	cancel()
	<-done
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "ifconfig em0 vhid") {
			t.Fatalf("a worker set CARP: %s", l)
		}
	}
}
