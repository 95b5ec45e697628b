package compose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

func TestPorts(t *testing.T) {
	t.Parallel()
	tcp := func(target, published int) (legion.ContainerPort, legion.ServicePort) {
		sp := legion.ServicePort{Protocol: legion.TCP, Port: target, TargetPort: legion.PortRef{Number: target}}
		if published != 0 {
			sp.Publish, sp.PublishedPort = legion.PublishIngress, published
		}
		return legion.ContainerPort{ContainerPort: target, Protocol: legion.TCP}, sp
	}
	c80, s8080 := tcp(80, 8080)
	_, s80 := tcp(80, 0)
	c81, s8081 := tcp(81, 8081)
	for _, tc := range []struct {
		spec string
		ctrs []legion.ContainerPort
		svcs []legion.ServicePort
		err  string
	}{
		{spec: "8080:80", ctrs: []legion.ContainerPort{c80}, svcs: []legion.ServicePort{s8080}},
		{spec: "80", ctrs: []legion.ContainerPort{c80}, svcs: []legion.ServicePort{s80}},
		{spec: "8080-8081:80-81", ctrs: []legion.ContainerPort{c80, c81}, svcs: []legion.ServicePort{s8080, s8081}},
		{spec: "5353:53/udp", ctrs: []legion.ContainerPort{{ContainerPort: 53, Protocol: legion.UDP}},
			svcs: []legion.ServicePort{{Protocol: legion.UDP, Port: 53, TargetPort: legion.PortRef{Number: 53}, Publish: legion.PublishIngress, PublishedPort: 5353}}},
		{spec: "127.0.0.1:8080:80", err: "a host address is not supported"},
		{spec: "8080:80/sctp", err: "only tcp and udp are supported"},
		{spec: "web", err: `"web": `},
	} {
		ctrs, svcs, err := Ports(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Ports(%q): %v, want an error containing %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Ports(%q): %v", tc.spec, err)
			continue
		}
		if d := cmp.Diff(tc.ctrs, ctrs); d != "" {
			t.Errorf("Ports(%q) container ports (-want +got):\n%s", tc.spec, d)
		}
		if d := cmp.Diff(tc.svcs, svcs); d != "" {
			t.Errorf("Ports(%q) service ports (-want +got):\n%s", tc.spec, d)
		}
	}
}
