package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
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
	e := &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }}
	t.Cleanup(e.Close)
	svc := []*endpoints.Service{{Namespace: "default", Name: "web", DNSRR: true,
		Ports: []endpoints.Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080, Publish: legion.PublishIngress, PublishedPort: port}}}}
	e.Apply(context.Background(), svc, nil)
	if err := e.PublishError(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("PublishError(%d) while another listener holds it: %v, want address in use", port, err)
	}
	held.Close()
	e.Apply(context.Background(), svc, nil)
	if err := e.PublishError(port); err != nil {
		t.Fatalf("PublishError(%d) once free: %v", port, err)
	}
	c, err := net.Dial("tcp", held.Addr().String())
	if err != nil {
		t.Fatalf("the published port is not served once free: %v", err)
	}
	c.Close()
}
