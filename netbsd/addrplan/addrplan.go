// Package addrplan is the cluster's address plan: the pod range with a
// /24 per node, the service (VIP) range, the WireGuard underlay, their
// IPv6 twins, and the pure functions that hand out node subnets, pod
// addresses and VIPs. Managers assign from it and nodes configure from
// it, so it sits apart from netbsd's node networking: a manager imports
// this package, not the code that runs ifconfig and pfctl.
//
// It imports only the standard library.
package addrplan

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
)

// The three ranges are fixed for the life of a cluster; their IPv6 twins
// are ULA ranges derived from them (5.2, 5.7).

// PodCIDR is the cluster's pod range; each node owns one /24 of it.
func PodCIDR() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, 0, 0}), 16) }

// ServiceCIDR is the range VIPs come from.
func ServiceCIDR() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, 0, 0}), 16) }

// UnderlayCIDR is the range of the nodes' wg0 addresses.
func UnderlayCIDR() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, 0, 0}), 16)
}

// PodCIDR6 is the pod range's twin; each node owns one /64 of it.
func PodCIDR6() netip.Prefix { return netip.PrefixFrom(v6(0x10, 0x200), 48) }

// ServiceCIDR6 is the service range's twin.
func ServiceCIDR6() netip.Prefix { return netip.PrefixFrom(v6(0x10, 0x201), 96) }

// UnderlayCIDR6 is the underlay range's twin.
func UnderlayCIDR6() netip.Prefix { return netip.PrefixFrom(v6(0x100, 0x64), 96) }

// MaxSubnets is how many node /24s the pod range holds.
const MaxSubnets = 256

// NodeSubnet is node n's pod subnet, 10.200.n.0/24.
func NodeSubnet(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(n), 0}), 24)
}

// NodeSubnet6 is node n's pod /64, fd00:10:200:n::/64.
func NodeSubnet6(n int) netip.Prefix {
	return netip.PrefixFrom(v6(0x10, 0x200, uint16(n), 0, 0, 0, 0), 64)
}

// Gateway is node n's address on legion0, 10.200.n.1.
func Gateway(n int) netip.Addr { return netip.AddrFrom4([4]byte{10, 200, byte(n), 1}) }

// UnderlayAddr is node n's wg0 address, 100.64.n.1 (in a /16).
func UnderlayAddr(n int) netip.Addr { return netip.AddrFrom4([4]byte{100, 64, byte(n), 1}) }

// v6 builds fd00:a:b:c:d:e:f:g.
func v6(g ...uint16) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfd, 0x00
	for i, x := range g {
		b[2+2*i] = byte(x >> 8)
		b[3+2*i] = byte(x)
	}
	return netip.AddrFrom16(b)
}

// Twin maps an address of one of the three IPv4 ranges to its IPv6 twin:
// pod 10.200.n.h is fd00:10:200:n::h, VIP 10.201.a.b is fd00:10:201::a:b,
// node 100.64.n.h is fd00:100:64::n:h (octets become group values). It
// reports false for any other address.
func Twin(a netip.Addr) (netip.Addr, bool) {
	if !a.Is4() {
		return netip.Addr{}, false
	}
	o := a.As4()
	switch {
	case o[0] == 10 && o[1] == 200:
		return v6(0x10, 0x200, uint16(o[2]), 0, 0, 0, uint16(o[3])), true
	case o[0] == 10 && o[1] == 201:
		return v6(0x10, 0x201, 0, 0, 0, uint16(o[2]), uint16(o[3])), true
	case o[0] == 100 && o[1] == 64:
		return v6(0x100, 0x64, 0, 0, 0, uint16(o[2]), uint16(o[3])), true
	}
	return netip.Addr{}, false
}

// MustTwin is Twin for addresses known to be in the ranges.
func MustTwin(a netip.Addr) netip.Addr {
	t, ok := Twin(a)
	if !ok {
		panic(fmt.Sprintf("netbsd: %s has no IPv6 twin", a))
	}
	return t
}

// Untwin is Twin's inverse: it reports false for an IPv6 address that is
// not the twin of an address in the ranges.
func Untwin(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	g := func(i int) uint16 { return uint16(b[2*i])<<8 | uint16(b[2*i+1]) }
	if g(0) != 0xfd00 {
		return netip.Addr{}, false
	}
	small := func(is ...int) bool {
		for _, i := range is {
			if g(i) > 0xff {
				return false
			}
		}
		return true
	}
	zero := func(is ...int) bool {
		for _, i := range is {
			if g(i) != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case g(1) == 0x10 && g(2) == 0x200 && zero(4, 5, 6) && small(3, 7):
		return netip.AddrFrom4([4]byte{10, 200, byte(g(3)), byte(g(7))}), true
	case g(1) == 0x10 && g(2) == 0x201 && zero(3, 4, 5) && small(6, 7):
		return netip.AddrFrom4([4]byte{10, 201, byte(g(6)), byte(g(7))}), true
	case g(1) == 0x100 && g(2) == 0x64 && zero(3, 4, 5) && small(6, 7):
		return netip.AddrFrom4([4]byte{100, 64, byte(g(6)), byte(g(7))}), true
	}
	return netip.Addr{}, false
}

// ErrExhausted is returned when a range has no free address or subnet left.
var ErrExhausted = errors.New("range exhausted")

// AssignSubnet gives node name its pod subnet index. reserved maps node
// names to the subnet they hold, deleted nodes' included; live reports
// whether a node still exists. A node keeps its reservation; a new one takes
// the lowest index nobody reserved and, once all 256 are reserved, the
// lowest one whose node is gone (the caller then moves the reservation).
func AssignSubnet(reserved map[string]int, live func(name string) bool, name string) (int, error) {
	if n, ok := reserved[name]; ok {
		return n, nil
	}
	holder := make(map[int]string, len(reserved))
	for node, n := range reserved {
		if n < 0 || n >= MaxSubnets {
			return 0, fmt.Errorf("node-subnets: reservation of %s: index %d, expected 0..%d", node, n, MaxSubnets-1)
		}
		if other, dup := holder[n]; dup {
			// Deterministic regardless of map order: report the smaller name first.
			a, b := other, node
			if b < a {
				a, b = b, a
			}
			return 0, fmt.Errorf("node-subnets: %s and %s both reserve index %d", a, b, n)
		}
		holder[n] = node
	}
	for n := 0; n < MaxSubnets; n++ {
		if _, taken := holder[n]; !taken {
			return n, nil
		}
	}
	for n := 0; n < MaxSubnets; n++ {
		if !live(holder[n]) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("pod CIDR %s: all %d node subnets are held by live nodes: %w", PodCIDR(), MaxSubnets, ErrExhausted)
}

// AssignPodAddr gives a task an address in node subnet n. assigned maps the
// node's task uids to their addresses (from Task.status.ip, so they survive
// agent restarts); a task keeps its address, a new one takes the lowest free
// host address (.2 to .254; .1 is the gateway).
func AssignPodAddr(n int, assigned map[string]netip.Addr, taskUID string) (netip.Addr, error) {
	subnet := NodeSubnet(n)
	if a, ok := assigned[taskUID]; ok {
		if !subnet.Contains(a) {
			return netip.Addr{}, fmt.Errorf("task %s: address %s is outside node subnet %s", taskUID, a, subnet)
		}
		return a, nil
	}
	used := make(map[byte]bool, len(assigned))
	for _, a := range assigned {
		if subnet.Contains(a) {
			used[a.As4()[3]] = true
		}
	}
	for h := 2; h <= 254; h++ {
		if !used[byte(h)] {
			return netip.AddrFrom4([4]byte{10, 200, byte(n), byte(h)}), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node subnet %s: no free pod address: %w", subnet, ErrExhausted)
}

// AssignVIP gives a service ("namespace/name") a VIP from the service range:
// its own if it has one, else the lowest free (10.201.0.1 to 10.201.255.254).
func AssignVIP(assigned map[string]netip.Addr, service string) (netip.Addr, error) {
	if a, ok := assigned[service]; ok {
		if !ServiceCIDR().Contains(a) {
			return netip.Addr{}, fmt.Errorf("service %s: VIP %s is outside %s", service, a, ServiceCIDR())
		}
		return a, nil
	}
	used := make(map[netip.Addr]bool, len(assigned))
	for _, a := range assigned {
		used[a] = true
	}
	cidr := ServiceCIDR()
	for a := cidr.Addr().Next(); cidr.Contains(a); a = a.Next() {
		if a.As4()[2] == 255 && a.As4()[3] == 255 {
			break
		}
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("service CIDR %s: no free VIP: %w", cidr, ErrExhausted)
}

// CheckRanges refuses a cluster whose ranges overlap a network already on
// one of its hosts (Podman's 10.88.0.0/16, a LAN, a VPN), as legion init
// does before fixing them.
func CheckRanges(hostNets map[string][]netip.Prefix) error {
	ranges := []struct {
		name string
		p    netip.Prefix
	}{
		{"underlay", UnderlayCIDR()}, {"pod CIDR", PodCIDR()}, {"service CIDR", ServiceCIDR()},
		{"underlay (IPv6)", UnderlayCIDR6()}, {"pod CIDR (IPv6)", PodCIDR6()}, {"service CIDR (IPv6)", ServiceCIDR6()},
	}
	hosts := make([]string, 0, len(hostNets))
	for h := range hostNets {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var errs []error
	for _, h := range hosts {
		for _, net := range hostNets[h] {
			for _, r := range ranges {
				if net.Overlaps(r.p) {
					errs = append(errs, fmt.Errorf("host %s: network %s overlaps the %s %s", h, net, r.name, r.p))
				}
			}
		}
	}
	return errors.Join(errs...)
}
