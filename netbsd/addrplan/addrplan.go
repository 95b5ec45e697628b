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
	"strconv"
)

// Plan is a cluster's two ranges, chosen at init and fixed for its life:
// pods (a /24 of it per node) and services (VIPs). Their IPv6 twins are
// ULA ranges derived from them (5.2, 5.7). The zero Plan is Default.
type Plan struct {
	Pod     netip.Prefix `json:"podCIDR"`
	Service netip.Prefix `json:"serviceCIDR"`
}

// ConfigName is the Config of the reserved namespace holding the plan
// (its JSON), written once by init.
const ConfigName = "cluster-network"

// Default is the plan of a cluster whose init was given no ranges on
// jails: 10.200.0.0/16 for pods, 10.201.0.0/16 for services.
func Default() Plan {
	return Plan{Pod: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, 0, 0}), 16),
		Service: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, 0, 0}), 16)}
}

// OrDefault is p, or Default when p is the zero Plan: what a caller
// reading the ranges themselves uses.
func (p Plan) OrDefault() Plan { return p.orDefault() }

// orDefault is p, or Default when p is the zero Plan.
func (p Plan) orDefault() Plan {
	if !p.Pod.IsValid() && !p.Service.IsValid() {
		return Default()
	}
	return p
}

// ParseRange reads one range given as field (a flag or key name): an
// IPv4 /16, which the /24-per-node and VIP arithmetic assume.
func ParseRange(field, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q: expected an IPv4 range such as 10.200.0.0/16: %w", field, s, err)
	}
	if !p.Addr().Is4() || p.Bits() != 16 {
		return netip.Prefix{}, fmt.Errorf("%s %s: expected an IPv4 /16 (each node takes a /24 of the pod range)", field, p)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%s %s: host bits set, expected %s", field, p, p.Masked())
	}
	return p, nil
}

// Validate checks a plan as ParseRange does and that its ranges overlap
// neither each other nor the underlay.
func (p Plan) Validate() error {
	for _, r := range []struct {
		field string
		p     netip.Prefix
	}{{"pod CIDR", p.Pod}, {"service CIDR", p.Service}} {
		if _, err := ParseRange(r.field, r.p.String()); err != nil {
			return err
		}
		if r.p.Overlaps(UnderlayCIDR()) {
			return fmt.Errorf("%s %s: overlaps the underlay %s", r.field, r.p, UnderlayCIDR())
		}
	}
	if p.Pod.Overlaps(p.Service) {
		return fmt.Errorf("pod CIDR %s and service CIDR %s overlap", p.Pod, p.Service)
	}
	return nil
}

// second is the second octet of a /16, the one the loopback network
// keeps (pod 10.X.n.h is 127.X.n.h there).
func second(p netip.Prefix) byte { return p.Addr().As4()[1] }

// PodOctet and ServiceOctet are the second octets of the two ranges.
func (p Plan) PodOctet() byte     { return second(p.orDefault().Pod) }
func (p Plan) ServiceOctet() byte { return second(p.orDefault().Service) }

// group writes an octet's decimal digits as a hex group, so twins read
// like their IPv4 addresses: 10.200 is fd00:10:200.
func group(o byte) uint16 {
	v, _ := strconv.ParseUint(strconv.Itoa(int(o)), 16, 16)
	return uint16(v)
}

// ungroup is group's inverse; false for a group that is not one.
func ungroup(g uint16) (byte, bool) {
	v, err := strconv.ParseUint(strconv.FormatUint(uint64(g), 16), 10, 8)
	return byte(v), err == nil
}

// Pod6 is the pod range's twin; each node owns one /64 of it.
func (p Plan) Pod6() netip.Prefix {
	o := p.orDefault().Pod.Addr().As4()
	return netip.PrefixFrom(v6(group(o[0]), group(o[1])), 48)
}

// Service6 is the service range's twin.
func (p Plan) Service6() netip.Prefix {
	o := p.orDefault().Service.Addr().As4()
	return netip.PrefixFrom(v6(group(o[0]), group(o[1])), 96)
}

// NodeSubnet is node n's pod subnet, the n-th /24 of the pod range.
func (p Plan) NodeSubnet(n int) netip.Prefix {
	o := p.orDefault().Pod.Addr().As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{o[0], o[1], byte(n), 0}), 24)
}

// NodeSubnet6 is node n's pod /64.
func (p Plan) NodeSubnet6(n int) netip.Prefix {
	o := p.orDefault().Pod.Addr().As4()
	return netip.PrefixFrom(v6(group(o[0]), group(o[1]), uint16(n), 0, 0, 0, 0), 64)
}

// Gateway is node n's address on legion0, .1 of its subnet; the node's
// resolver answers there.
func (p Plan) Gateway(n int) netip.Addr { return p.NodeSubnet(n).Addr().Next() }

// The default plan's ranges and helpers, kept for jails nodes and code
// that has no cluster plan at hand.

// PodCIDR is the default pod range; each node owns one /24 of it.
func PodCIDR() netip.Prefix { return Default().Pod }

// ServiceCIDR is the default range VIPs come from.
func ServiceCIDR() netip.Prefix { return Default().Service }

// UnderlayCIDR is the range of the nodes' wg0 addresses.
func UnderlayCIDR() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, 0, 0}), 16)
}

// PodCIDR6 is the default pod range's twin.
func PodCIDR6() netip.Prefix { return Default().Pod6() }

// ServiceCIDR6 is the default service range's twin.
func ServiceCIDR6() netip.Prefix { return Default().Service6() }

// UnderlayCIDR6 is the underlay range's twin.
func UnderlayCIDR6() netip.Prefix { return netip.PrefixFrom(v6(0x100, 0x64), 96) }

// MaxSubnets is how many node /24s the pod range holds.
const MaxSubnets = 256

// NodeSubnet is node n's pod subnet in the default plan, 10.200.n.0/24.
func NodeSubnet(n int) netip.Prefix { return Default().NodeSubnet(n) }

// NodeSubnet6 is node n's pod /64 in the default plan.
func NodeSubnet6(n int) netip.Prefix { return Default().NodeSubnet6(n) }

// Gateway is node n's gateway in the default plan, 10.200.n.1.
func Gateway(n int) netip.Addr { return Default().Gateway(n) }

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

// Twin maps an address of the default plan's ranges to its IPv6 twin
// (Plan.Twin).
func Twin(a netip.Addr) (netip.Addr, bool) { return Default().Twin(a) }

// MustTwin is Twin for addresses known to be in the default ranges.
func MustTwin(a netip.Addr) netip.Addr { return Default().MustTwin(a) }

// Untwin is Twin's inverse for the default plan.
func Untwin(a netip.Addr) (netip.Addr, bool) { return Default().Untwin(a) }

// Twin maps an address of one of the three IPv4 ranges to its IPv6 twin:
// pod 10.200.n.h is fd00:10:200:n::h, VIP 10.201.a.b is fd00:10:201::a:b,
// node 100.64.n.h is fd00:100:64::n:h (octets become group values). It
// reports false for any other address.
func (p Plan) Twin(a netip.Addr) (netip.Addr, bool) {
	if !a.Is4() {
		return netip.Addr{}, false
	}
	p = p.orDefault()
	o := a.As4()
	switch {
	case p.Pod.Contains(a):
		return v6(group(o[0]), group(o[1]), uint16(o[2]), 0, 0, 0, uint16(o[3])), true
	case p.Service.Contains(a):
		return v6(group(o[0]), group(o[1]), 0, 0, 0, uint16(o[2]), uint16(o[3])), true
	case UnderlayCIDR().Contains(a):
		return v6(0x100, 0x64, 0, 0, 0, uint16(o[2]), uint16(o[3])), true
	}
	return netip.Addr{}, false
}

// MustTwin is Twin for addresses known to be in the ranges.
func (p Plan) MustTwin(a netip.Addr) netip.Addr {
	t, ok := p.Twin(a)
	if !ok {
		panic(fmt.Sprintf("netbsd: %s has no IPv6 twin", a))
	}
	return t
}

// Untwin is Twin's inverse: it reports false for an IPv6 address that is
// not the twin of an address in the ranges.
func (p Plan) Untwin(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	p = p.orDefault()
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
	o0, ok0 := ungroup(g(1))
	o1, ok1 := ungroup(g(2))
	in := func(r netip.Prefix) bool {
		return ok0 && ok1 && r.Contains(netip.AddrFrom4([4]byte{o0, o1, 0, 0}))
	}
	switch {
	case in(p.Pod) && zero(4, 5, 6) && small(3, 7):
		return netip.AddrFrom4([4]byte{o0, o1, byte(g(3)), byte(g(7))}), true
	case in(p.Service) && zero(3, 4, 5) && small(6, 7):
		return netip.AddrFrom4([4]byte{o0, o1, byte(g(6)), byte(g(7))}), true
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
	return 0, fmt.Errorf("pod CIDR: all %d node subnets are held by live nodes: %w", MaxSubnets, ErrExhausted)
}

// AssignPodAddr gives a task an address in node subnet n. assigned maps the
// node's task uids to their addresses (from Task.status.ip, so they survive
// agent restarts); a task keeps its address, a new one takes the lowest free
// host address (.2 to .254; .1 is the gateway).
func AssignPodAddr(n int, assigned map[string]netip.Addr, taskUID string) (netip.Addr, error) {
	return Default().AssignPodAddr(n, assigned, taskUID)
}

// AssignPodAddr is the package's AssignPodAddr in p's pod range.
func (p Plan) AssignPodAddr(n int, assigned map[string]netip.Addr, taskUID string) (netip.Addr, error) {
	subnet := p.NodeSubnet(n)
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
			o := subnet.Addr().As4()
			return netip.AddrFrom4([4]byte{o[0], o[1], byte(n), byte(h)}), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node subnet %s: no free pod address: %w", subnet, ErrExhausted)
}

// AssignVIP gives a service ("namespace/name") a VIP from the service range:
// its own if it has one, else the lowest free (10.201.0.1 to 10.201.255.254).
func AssignVIP(assigned map[string]netip.Addr, service string) (netip.Addr, error) {
	return Default().AssignVIP(assigned, service)
}

// AssignVIP is the package's AssignVIP in p's service range.
func (p Plan) AssignVIP(assigned map[string]netip.Addr, service string) (netip.Addr, error) {
	cidr := p.orDefault().Service
	if a, ok := assigned[service]; ok {
		if !cidr.Contains(a) {
			return netip.Addr{}, fmt.Errorf("service %s: VIP %s is outside %s", service, a, cidr)
		}
		return a, nil
	}
	used := make(map[netip.Addr]bool, len(assigned))
	for _, a := range assigned {
		used[a] = true
	}
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
func CheckRanges(hostNets map[string][]netip.Prefix) error { return Default().CheckRanges(hostNets) }

// CheckRanges is the package's CheckRanges for p's ranges.
func (p Plan) CheckRanges(hostNets map[string][]netip.Prefix) error {
	p = p.orDefault()
	ranges := []struct {
		name string
		p    netip.Prefix
	}{
		{"underlay", UnderlayCIDR()}, {"pod CIDR", p.Pod}, {"service CIDR", p.Service},
		{"underlay (IPv6)", UnderlayCIDR6()}, {"pod CIDR (IPv6)", p.Pod6()}, {"service CIDR (IPv6)", p.Service6()},
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
