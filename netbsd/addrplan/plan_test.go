package addrplan

import (
	"net/netip"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseRangeRefusesOtherSizes(t *testing.T) {
	t.Parallel()
	if p, err := ParseRange("--pod-cidr", "10.42.0.0/16"); err != nil || p != netip.MustParsePrefix("10.42.0.0/16") {
		t.Fatalf("ParseRange(10.42.0.0/16) = %v, %v", p, err)
	}
	for in, want := range map[string]string{
		"10.42.0.0/24":   "--pod-cidr 10.42.0.0/24: expected an IPv4 /16",
		"10.0.0.0/8":     "--pod-cidr 10.0.0.0/8: expected an IPv4 /16",
		"fd00:1::/48":    "--pod-cidr fd00:1::/48: expected an IPv4 /16",
		"10.42.7.0/16":   "--pod-cidr 10.42.7.0/16: host bits set, expected 10.42.0.0/16",
		"not-a-range/16": `--pod-cidr "not-a-range/16": expected an IPv4 range`,
	} {
		if _, err := ParseRange("--pod-cidr", in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRange(%s) = %v; want an error containing %q", in, err, want)
		}
	}
}

func TestPlanValidate(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	if err := (Plan{Pod: pfx("10.42.0.0/16"), Service: pfx("10.43.0.0/16")}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Plan
		want string
	}{
		{Plan{Pod: pfx("10.42.0.0/16"), Service: pfx("10.42.0.0/16")}, "pod CIDR 10.42.0.0/16 and service CIDR 10.42.0.0/16 overlap"},
		{Plan{Pod: pfx("100.64.0.0/16"), Service: pfx("10.43.0.0/16")}, "pod CIDR 100.64.0.0/16: overlaps the underlay"},
		{Plan{Pod: pfx("10.42.0.0/16"), Service: pfx("10.43.0.0/24")}, "service CIDR 10.43.0.0/24: expected an IPv4 /16"},
	} {
		if err := c.p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v) = %v; want %q", c.p, err, c.want)
		}
	}
}

func TestPlanAddressesFollowRanges(t *testing.T) {
	t.Parallel()
	p := Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("172.17.0.0/16")}
	if got := p.NodeSubnet(3); got != netip.MustParsePrefix("10.42.3.0/24") {
		t.Errorf("NodeSubnet(3) = %s", got)
	}
	if got := p.Gateway(3); got != addr("10.42.3.1") {
		t.Errorf("Gateway(3) = %s", got)
	}
	if a, err := p.AssignPodAddr(3, nil, "t1"); err != nil || a != addr("10.42.3.2") {
		t.Errorf("AssignPodAddr = %s, %v", a, err)
	}
	if a, err := p.AssignVIP(nil, "ns/web"); err != nil || a != addr("172.17.0.1") {
		t.Errorf("AssignVIP = %s, %v", a, err)
	}
	if _, err := p.AssignVIP(map[string]netip.Addr{"ns/web": addr("10.201.0.1")}, "ns/web"); err == nil {
		t.Error("a VIP outside the plan's service range was kept")
	}
	if p.PodOctet() != 42 || p.ServiceOctet() != 17 {
		t.Errorf("octets = %d, %d", p.PodOctet(), p.ServiceOctet())
	}
	for v4, v6 := range map[string]string{"10.42.3.17": "fd00:10:42:3::11", "172.17.1.2": "fd00:172:17::1:2", "100.64.3.1": "fd00:100:64::3:1"} {
		if got, ok := p.Twin(addr(v4)); !ok || got != addr(v6) {
			t.Errorf("Twin(%s) = %s, %v; want %s", v4, got, ok, v6)
		}
		if back, ok := p.Untwin(addr(v6)); !ok || back != addr(v4) {
			t.Errorf("Untwin(%s) = %s, %v", v6, back, ok)
		}
	}
	if _, ok := p.Twin(addr("10.200.3.17")); ok {
		t.Error("an address of the default pod range has a twin in another plan")
	}
	if !p.Pod6().Contains(p.MustTwin(addr("10.42.255.255"))) || !p.Service6().Contains(p.MustTwin(addr("172.17.255.255"))) {
		t.Error("twins fall outside the twin ranges")
	}
	err := p.CheckRanges(map[string][]netip.Prefix{"h1": {netip.MustParsePrefix("172.16.0.0/12")}})
	if err == nil || !strings.Contains(err.Error(), "host h1: network 172.16.0.0/12 overlaps the service CIDR 172.17.0.0/16") {
		t.Errorf("CheckRanges = %v", err)
	}
}

func TestPropertyPlanTwinsBijection(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		pod := rapid.IntRange(0, 255).Draw(t, "pod")
		svc := rapid.IntRange(0, 255).Filter(func(x int) bool { return x != pod }).Draw(t, "svc")
		p := Plan{Pod: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(pod), 0, 0}), 16),
			Service: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(svc), 0, 0}), 16)}
		r := p.Pod
		if rapid.Bool().Draw(t, "service") {
			r = p.Service
		}
		o := r.Addr().As4()
		a := netip.AddrFrom4([4]byte{o[0], o[1], byte(rapid.IntRange(0, 255).Draw(t, "c")), byte(rapid.IntRange(0, 255).Draw(t, "d"))})
		tw, ok := p.Twin(a)
		if !ok {
			t.Fatalf("%s has no twin in %v", a, p)
		}
		if back, ok := p.Untwin(tw); !ok || back != a {
			t.Fatalf("Untwin(Twin(%s)) = %s, %v", a, back, ok)
		}
	})
}
