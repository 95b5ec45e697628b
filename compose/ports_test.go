package compose

import (
	"fmt"
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

// AddPort publishes a target as often as it is given, each publish past
// the first on a VIP port of its own, and names the port in the way when
// that VIP port is taken.
func TestAddPort(t *testing.T) {
	t.Parallel()
	// port is "VIP/target" with ":published" (ingress) or "=published" (host).
	port := func(s string) legion.ServicePort {
		var vip, target, pub int
		var err error
		sp := legion.ServicePort{Protocol: legion.TCP}
		switch {
		case strings.Contains(s, ":"):
			_, err = fmt.Sscanf(s, "%d/%d:%d", &vip, &target, &pub)
			sp.Publish = legion.PublishIngress
		case strings.Contains(s, "="):
			_, err = fmt.Sscanf(s, "%d/%d=%d", &vip, &target, &pub)
			sp.Publish = legion.PublishHost
		default:
			_, err = fmt.Sscanf(s, "%d/%d", &vip, &target)
		}
		if err != nil {
			t.Fatalf("port %q: %v", s, err)
		}
		sp.Port, sp.TargetPort.Number, sp.PublishedPort = vip, target, pub
		return sp
	}
	ports := func(ss ...string) []legion.ServicePort {
		var out []legion.ServicePort
		for _, s := range ss {
			out = append(out, port(s))
		}
		return out
	}
	for _, tc := range []struct {
		have []string
		add  string // as Ports makes it: VIP equal to target
		want []string
		err  string
	}{
		{have: nil, add: "80/80:8080", want: []string{"80/80:8080"}},
		{have: []string{"80/80"}, add: "80/80:8080", want: []string{"80/80:8080"}},
		{have: []string{"80/80:8080"}, add: "80/80", want: []string{"80/80:8080"}},
		{have: []string{"80/80:8080"}, add: "80/80:8080", want: []string{"80/80:8080"}},
		{have: []string{"80/80:8080"}, add: "80/80:8081", want: []string{"80/80:8080", "8081/80:8081"}},
		{have: []string{"80/80:8080"}, add: "80/80=9000", want: []string{"80/80:8080", "9000/80=9000"}},
		// Published on the target itself: that publish keeps the target.
		{have: []string{"8080/8080:80"}, add: "8080/8080:8080", want: []string{"80/8080:80", "8080/8080:8080"}},
		{have: []string{"80/80:8080", "8081/80:8081"}, add: "8081/8081", err: "target 8081/tcp needs service port 8081/tcp, which target 80 has already"},
		{have: []string{"81/81", "80/80:8080"}, add: "80/80:81", err: "target 80/tcp published on 81 needs service port 81/tcp, which target 81 has already"},
		{have: []string{"80/80", "8080/8080:80"}, add: "8080/8080:8080", err: "target 8080/tcp published on 80 needs service port 80/tcp, which target 80 has already"},
	} {
		got, err := AddPort(ports(tc.have...), port(tc.add))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("AddPort(%q, %q) = %v, %v; want the error %q", tc.have, tc.add, got, err, tc.err)
			}
			continue
		}
		if diff := cmp.Diff(ports(tc.want...), got); err != nil || diff != "" {
			t.Errorf("AddPort(%q, %q): %v, -want +got:\n%s", tc.have, tc.add, err, diff)
		}
	}
	// The input is not changed in place, and a second publish drops a
	// name its first has.
	have := []legion.ServicePort{{Name: "web", Protocol: legion.TCP, Port: 8080, TargetPort: legion.PortRef{Number: 8080}, Publish: legion.PublishIngress, PublishedPort: 80}}
	again := legion.ServicePort{Name: "web", Protocol: legion.TCP, Port: 8080, TargetPort: legion.PortRef{Number: 8080}, Publish: legion.PublishIngress, PublishedPort: 8080}
	got, err := AddPort(have, again)
	if err != nil || len(got) != 2 || got[0].Name != "web" || got[1].Name != "" || have[0].Port != 8080 || got[0].Port != 80 {
		t.Errorf("AddPort of a named target again: %+v, %v (input now %+v)", got, err, have)
	}
}
