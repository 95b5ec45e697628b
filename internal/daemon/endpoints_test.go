package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
)

// heldPort is a port another listener holds until the test ends (or
// the caller closes it first), and the services publishing it.
func heldPort(t *testing.T) (net.Listener, int, []*endpoints.Service) {
	t.Helper()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	port := held.Addr().(*net.TCPAddr).Port
	return held, port, []*endpoints.Service{{Namespace: "default", Name: "web", DNSRR: true,
		Ports: []endpoints.Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080, Publish: legion.PublishIngress, PublishedPort: port}}}}
}

// A published port another process holds is not served, and the
// endpoints say why until a later change finds it free and serves it.
func TestAPublishedPortHeldElsewhereIsSaid(t *testing.T) {
	t.Parallel()
	held, port, svc := heldPort(t)
	var changes atomic.Int32
	// Retried at the next Apply alone here (see the test below).
	e := &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }, Changed: func() { changes.Add(1) }, Retry: time.Hour}
	t.Cleanup(e.Close)
	e.Apply(context.Background(), svc, nil)
	if err := e.PublishError(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("PublishError(%d) while another listener holds it: %v, want address in use", port, err)
	}
	// The node reports it: listed, and Changed told once, not again for
	// the same problem.
	if got := e.PublishErrors(); len(got) != 1 || got[0].Port != port || !strings.Contains(got[0].Error, "address already in use") {
		t.Fatalf("PublishErrors: %+v", got)
	}
	e.Apply(context.Background(), svc, nil)
	if n := changes.Load(); n != 1 {
		t.Fatalf("Changed called %d times for one problem, want 1", n)
	}
	held.Close()
	e.Apply(context.Background(), svc, nil)
	if err := e.PublishError(port); err != nil {
		t.Fatalf("PublishError(%d) once free: %v", port, err)
	}
	if got, n := e.PublishErrors(), changes.Load(); got != nil || n != 2 {
		t.Fatalf("once free: PublishErrors %+v, Changed called %d times, want none and 2", got, n)
	}
	c, err := net.Dial("tcp", held.Addr().String())
	if err != nil {
		t.Fatalf("the published port is not served once free: %v", err)
	}
	c.Close()
}

// A port freed by the process that held it is served without a change
// of the endpoints: the node tries it again every Retry, says so once it
// serves it, and Close ends the retries at once.
func TestAFreedPortIsServedWithoutAChange(t *testing.T) {
	t.Parallel()
	held, port, svc := heldPort(t)
	var changes atomic.Int32
	e := &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }, Changed: func() { changes.Add(1) }, Retry: 20 * time.Millisecond}
	t.Cleanup(e.Close)
	e.Apply(context.Background(), svc, nil)
	if e.PublishError(port) == nil {
		t.Fatal("the held port is said to be served")
	}
	held.Close()
	poll(t, "the freed port served", 10*time.Second, func() bool { return e.PublishError(port) == nil && changes.Load() == 2 })
	c, err := net.Dial("tcp", held.Addr().String())
	if err != nil {
		t.Fatalf("the freed port is not served: %v", err)
	}
	c.Close()

	// Held again by another, a new retry begins; Close ends it at once.
	e2 := &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }, Retry: time.Hour}
	e2.Apply(context.Background(), svc, nil)
	closed := make(chan struct{})
	go func() { e2.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the retry's next tick")
	}
}
