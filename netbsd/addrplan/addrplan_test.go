package addrplan

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestTwinTable(t *testing.T) {
	for _, c := range []struct{ v4, v6 string }{
		{"10.200.3.17", "fd00:10:200:3::11"}, // the design's own example
		{"10.200.3.1", "fd00:10:200:3::1"},
		{"10.200.255.254", "fd00:10:200:ff::fe"},
		{"10.201.0.5", "fd00:10:201::5"},
		{"10.201.1.2", "fd00:10:201::1:2"},
		{"100.64.3.1", "fd00:100:64::3:1"},
		{"100.64.0.1", "fd00:100:64::1"},
	} {
		got, ok := Twin(addr(c.v4))
		if !ok || got != addr(c.v6) {
			t.Errorf("Twin(%s) = %s, %v; want %s", c.v4, got, ok, c.v6)
		}
		back, ok := Untwin(addr(c.v6))
		if !ok || back != addr(c.v4) {
			t.Errorf("Untwin(%s) = %s, %v; want %s", c.v6, back, ok, c.v4)
		}
	}
	for _, a := range []string{"10.88.0.1", "192.0.2.1", "fd00:10:200:3::1"} {
		if _, ok := Twin(addr(a)); ok {
			t.Errorf("Twin(%s) must not exist", a)
		}
	}
	for _, a := range []string{"fd00:10:200:3::1:11", "fd00:10:200:100::1", "fd00:10:202::1", "2001:db8::1", "::ffff:10.200.3.17"} {
		if _, ok := Untwin(addr(a)); ok {
			t.Errorf("Untwin(%s) must not exist", a)
		}
	}
	if NodeSubnet6(3) != netip.MustParsePrefix("fd00:10:200:3::/64") || !PodCIDR6().Contains(MustTwin(addr("10.200.255.255"))) {
		t.Error("node /64 is not where the twins are")
	}
}

func TestAssignSubnet(t *testing.T) {
	live := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}
	}
	res := map[string]int{"a": 0, "b": 2}
	if n, _ := AssignSubnet(res, live("a", "b"), "c"); n != 1 {
		t.Errorf("lowest free: got %d", n)
	}
	if n, _ := AssignSubnet(res, live("a"), "b"); n != 2 {
		t.Errorf("a rejoining node keeps its reservation: got %d", n)
	}
	full := map[string]int{}
	for i := range MaxSubnets {
		full[fmt.Sprintf("node%03d", i)] = i
	}
	everyone := func(string) bool { return true }
	if _, err := AssignSubnet(full, everyone, "new"); !errors.Is(err, ErrExhausted) {
		t.Errorf("all live: want ErrExhausted, got %v", err)
	}
	gone := func(n string) bool { return n != "node007" && n != "node009" }
	if n, err := AssignSubnet(full, gone, "new"); err != nil || n != 7 {
		t.Errorf("all taken: the lowest one whose node is gone, got %d %v", n, err)
	}
	if _, err := AssignSubnet(map[string]int{"a": 1, "b": 1}, everyone, "c"); err == nil || !strings.Contains(err.Error(), "a and b both reserve index 1") {
		t.Errorf("double reservation: %v", err)
	}
}

func TestAssignPodAddrAndVIP(t *testing.T) {
	got, err := AssignPodAddr(3, map[string]netip.Addr{"t1": addr("10.200.3.2"), "t2": addr("10.200.3.4")}, "t3")
	if err != nil || got != addr("10.200.3.3") {
		t.Errorf("lowest free: %s %v", got, err)
	}
	got, err = AssignPodAddr(3, map[string]netip.Addr{"t1": addr("10.200.3.9")}, "t1")
	if err != nil || got != addr("10.200.3.9") {
		t.Errorf("kept across restarts: %s %v", got, err)
	}
	if _, err := AssignPodAddr(3, map[string]netip.Addr{"t1": addr("10.200.4.9")}, "t1"); err == nil {
		t.Error("an address in another subnet must be refused")
	}
	all := map[string]netip.Addr{}
	for h := 2; h <= 254; h++ {
		all[fmt.Sprint(h)] = netip.AddrFrom4([4]byte{10, 200, 3, byte(h)})
	}
	if _, err := AssignPodAddr(3, all, "new"); !errors.Is(err, ErrExhausted) {
		t.Errorf("full subnet: %v", err)
	}
	vip, err := AssignVIP(map[string]netip.Addr{"shop/web": addr("10.201.0.1")}, "shop/db")
	if err != nil || vip != addr("10.201.0.2") {
		t.Errorf("VIP: %s %v", vip, err)
	}
}

func TestCheckRanges(t *testing.T) {
	if err := CheckRanges(map[string][]netip.Prefix{"h1": {netip.MustParsePrefix("10.88.0.0/16"), netip.MustParsePrefix("192.168.1.0/24")}}); err != nil {
		t.Errorf("Podman's default must not clash: %v", err)
	}
	err := CheckRanges(map[string][]netip.Prefix{
		"h1": {netip.MustParsePrefix("10.0.0.0/8")},
		"h2": {netip.MustParsePrefix("fd00::/8")},
	})
	want := []string{
		"host h1: network 10.0.0.0/8 overlaps the pod CIDR 10.200.0.0/16",
		"host h1: network 10.0.0.0/8 overlaps the service CIDR 10.201.0.0/16",
		"host h2: network fd00::/8 overlaps the underlay (IPv6) fd00:100:64::/96",
		"host h2: network fd00::/8 overlaps the pod CIDR (IPv6) fd00:10:200::/48",
		"host h2: network fd00::/8 overlaps the service CIDR (IPv6) fd00:10:201::/96",
	}
	if err == nil {
		t.Fatal("overlaps must be refused")
	}
	if d := cmp.Diff(want, strings.Split(err.Error(), "\n")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// Nodes joining and leaving in any order never share a /24, and a node
// that comes back gets its own back while the range is not full.
func TestPropertySubnetsUnique(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		reserved := map[string]int{}
		alive := map[string]bool{}
		steps := rapid.IntRange(1, 400).Draw(t, "steps")
		for range steps {
			name := fmt.Sprintf("n%d", rapid.IntRange(0, 300).Draw(t, "node"))
			if alive[name] && rapid.Bool().Draw(t, "delete") {
				delete(alive, name) // the reservation stays
				continue
			}
			prev, had := reserved[name]
			n, err := AssignSubnet(reserved, func(s string) bool { return alive[s] }, name)
			if errors.Is(err, ErrExhausted) {
				if len(alive) < MaxSubnets && !alive[name] {
					t.Fatalf("exhausted with %d live nodes", len(alive))
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if had && n != prev {
				t.Fatalf("%s had %d, got %d", name, prev, n)
			}
			// Move the reservation from a gone holder, as the manager does.
			for other, m := range reserved {
				if m == n && other != name {
					if alive[other] {
						t.Fatalf("%s given %d held by live %s", name, n, other)
					}
					delete(reserved, other)
				}
			}
			reserved[name] = n
			alive[name] = true
			seen := map[int]string{}
			for node := range alive {
				if o, dup := seen[reserved[node]]; dup {
					t.Fatalf("%s and %s share /24 %d", node, o, reserved[node])
				}
				seen[reserved[node]] = node
			}
		}
	})
}

// Tasks starting and stopping never share an address, and a task keeps
// its own.
func TestPropertyPodAddrsUnique(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 255).Draw(t, "subnet")
		assigned := map[string]netip.Addr{}
		for range rapid.IntRange(1, 600).Draw(t, "steps") {
			uid := fmt.Sprintf("t%d", rapid.IntRange(0, 400).Draw(t, "task"))
			if _, ok := assigned[uid]; ok && rapid.Bool().Draw(t, "stop") {
				delete(assigned, uid)
				continue
			}
			prev, had := assigned[uid]
			a, err := AssignPodAddr(n, assigned, uid)
			if errors.Is(err, ErrExhausted) {
				if len(assigned) < 253 {
					t.Fatalf("exhausted with %d tasks", len(assigned))
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if had && a != prev {
				t.Fatalf("%s moved from %s to %s", uid, prev, a)
			}
			if a == Gateway(n) || !NodeSubnet(n).Contains(a) {
				t.Fatalf("%s given %s", uid, a)
			}
			assigned[uid] = a
			seen := map[netip.Addr]string{}
			for u, x := range assigned {
				if o, dup := seen[x]; dup {
					t.Fatalf("%s and %s share %s", u, o, x)
				}
				seen[x] = u
			}
		}
	})
}

// Twins are a bijection between the three IPv4 ranges and their twins.
func TestPropertyTwinsBijection(t *testing.T) {
	ranges := []netip.Prefix{PodCIDR(), ServiceCIDR(), UnderlayCIDR()}
	gen := rapid.Custom(func(t *rapid.T) netip.Addr {
		r := ranges[rapid.IntRange(0, 2).Draw(t, "range")]
		b := r.Addr().As4()
		b[2], b[3] = rapid.Byte().Draw(t, "c"), rapid.Byte().Draw(t, "d")
		return netip.AddrFrom4(b)
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		ta, ok1 := Twin(a)
		tb, ok2 := Twin(b)
		if !ok1 || !ok2 {
			t.Fatalf("no twin for %s or %s", a, b)
		}
		if (a == b) != (ta == tb) {
			t.Fatalf("%s->%s and %s->%s", a, ta, b, tb)
		}
		if back, ok := Untwin(ta); !ok || back != a {
			t.Fatalf("Untwin(Twin(%s)) = %s, %v", a, back, ok)
		}
		for i, r := range []netip.Prefix{PodCIDR6(), ServiceCIDR6(), UnderlayCIDR6()} {
			if ranges[i].Contains(a) != r.Contains(ta) {
				t.Fatalf("%s's twin %s is in the wrong range", a, ta)
			}
		}
	})
	// And every IPv6 address Untwin accepts is some twin.
	rapid.Check(t, func(t *rapid.T) {
		var b [16]byte
		for i := range b {
			b[i] = rapid.Byte().Draw(t, "byte")
		}
		pre := [][]byte{{0xfd, 0, 0, 0x10, 0x02, 0x00}, {0xfd, 0, 0, 0x10, 0x02, 0x01}, {0xfd, 0, 0x01, 0x00, 0, 0x64}}[rapid.IntRange(0, 2).Draw(t, "range")]
		copy(b[:], pre)
		v := netip.AddrFrom16(b)
		if a, ok := Untwin(v); ok {
			if tw, _ := Twin(a); tw != v {
				t.Fatalf("Untwin(%s) = %s whose twin is %s", v, a, tw)
			}
		}
	})
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
