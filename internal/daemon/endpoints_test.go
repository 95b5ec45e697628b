package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
)

// A published port another process holds is not served, and the
// endpoints say why until a later change finds it free and serves it.
func TestAPublishedPortHeldElsewhereIsSaid(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	port := held.Addr().(*net.TCPAddr).Port
	changes := 0
	e := &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }, Changed: func() { changes++ }}
	t.Cleanup(e.Close)
	svc := []*endpoints.Service{{Namespace: "default", Name: "web", DNSRR: true,
		Ports: []endpoints.Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080, Publish: legion.PublishIngress, PublishedPort: port}}}}
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
	if changes != 1 {
		t.Fatalf("Changed called %d times for one problem, want 1", changes)
	}
	held.Close()
	e.Apply(context.Background(), svc, nil)
	if err := e.PublishError(port); err != nil {
		t.Fatalf("PublishError(%d) once free: %v", port, err)
	}
	if got := e.PublishErrors(); got != nil || changes != 2 {
		t.Fatalf("once free: PublishErrors %+v, Changed called %d times, want none and 2", got, changes)
	}
	c, err := net.Dial("tcp", held.Addr().String())
	if err != nil {
		t.Fatalf("the published port is not served once free: %v", err)
	}
	c.Close()
}
