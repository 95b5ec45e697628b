package netbsd

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ifaceInfo is what ifconfig(8) printed for one interface.
type ifaceInfo struct {
	Name    string
	Flags   []string // UP, RUNNING, ...
	ND6     []string // nd6 options: IFDISABLED, ...
	MTU     int
	Ether   string
	Addrs   []netip.Prefix // inet and inet6, link-local ones without their zone
	Members []string       // bridge members
}

func (i *ifaceInfo) has(p netip.Prefix) bool {
	for _, a := range i.Addrs {
		if a.Addr() == p.Addr() {
			return true
		}
	}
	return false
}

func hasWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// parseIfconfig reads ifconfig's default output, one or more interfaces.
func parseIfconfig(out string) ([]ifaceInfo, error) {
	var ifs []ifaceInfo
	for ln, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if line[0] != '\t' && line[0] != ' ' {
			name, rest, ok := strings.Cut(line, ": ")
			if !ok {
				return nil, fmt.Errorf("ifconfig output line %d: %q: expected \"name: flags=...\"", ln+1, line)
			}
			info := ifaceInfo{Name: name, Flags: angleWords(rest, "flags=")}
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i++ {
				if f[i] != "mtu" {
					continue
				}
				// A wrong MTU read as 0 would have the plan set it on every pass.
				mtu, err := strconv.Atoi(f[i+1])
				if err != nil || mtu < 1 || mtu > maxMTU {
					return nil, fmt.Errorf("ifconfig output line %d: mtu %q: expected 1..%d", ln+1, f[i+1], maxMTU)
				}
				info.MTU = mtu
			}
			ifs = append(ifs, info)
			continue
		}
		if len(ifs) == 0 {
			return nil, fmt.Errorf("ifconfig output line %d: %q before any interface", ln+1, line)
		}
		cur := &ifs[len(ifs)-1]
		f := strings.Fields(line)
		switch f[0] {
		case "ether":
			if len(f) > 1 {
				cur.Ether = f[1]
			}
		case "nd6":
			cur.ND6 = angleWords(line, "options=")
		case "member:":
			if len(f) > 1 {
				cur.Members = append(cur.Members, f[1])
			}
		case "inet":
			if len(f) < 4 || f[2] != "netmask" {
				return nil, fmt.Errorf("ifconfig output line %d: %q: expected \"inet A netmask 0x...\"", ln+1, line)
			}
			a, err := netip.ParseAddr(f[1])
			if err != nil {
				return nil, fmt.Errorf("ifconfig output line %d: %w", ln+1, err)
			}
			if !a.Is4() {
				return nil, fmt.Errorf("ifconfig output line %d: inet address %s is not IPv4", ln+1, f[1])
			}
			plen, err := maskBits(f[3])
			if err != nil {
				return nil, fmt.Errorf("ifconfig output line %d: %w", ln+1, err)
			}
			cur.Addrs = append(cur.Addrs, netip.PrefixFrom(a, plen))
		case "inet6":
			if len(f) < 4 || f[2] != "prefixlen" {
				return nil, fmt.Errorf("ifconfig output line %d: %q: expected \"inet6 A prefixlen N\"", ln+1, line)
			}
			a, err := netip.ParseAddr(f[1])
			if err != nil {
				return nil, fmt.Errorf("ifconfig output line %d: %w", ln+1, err)
			}
			if !a.Is6() {
				return nil, fmt.Errorf("ifconfig output line %d: inet6 address %s is not IPv6", ln+1, f[1])
			}
			plen, err := strconv.Atoi(f[3])
			if err != nil || plen < 0 || plen > 128 {
				return nil, fmt.Errorf("ifconfig output line %d: prefixlen %q: expected 0..128", ln+1, f[3])
			}
			cur.Addrs = append(cur.Addrs, netip.PrefixFrom(a.WithZone(""), plen))
		}
	}
	return ifs, nil
}

// maxMTU is the largest MTU an interface can have (IF_MAXMTU).
const maxMTU = 65535

// maskBits reads an inet netmask as ifconfig prints it (0xffffff00) and
// returns its prefix length; a mask whose ones are not contiguous has none.
func maskBits(s string) (int, error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("netmask %q: expected 0x and 8 hex digits", s)
	}
	mask, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("netmask %q: expected 0x and 8 hex digits", s)
	}
	ones := bits.LeadingZeros32(^uint32(mask))
	if ones < 32 && uint32(mask)<<ones != 0 {
		return 0, fmt.Errorf("netmask %q: its ones are not contiguous", s)
	}
	return ones, nil
}

// angleWords returns the comma-separated words in <...> after key.
func angleWords(s, key string) []string {
	i := strings.Index(s, key)
	if i < 0 {
		return nil
	}
	s = s[i:]
	open, close := strings.IndexByte(s, '<'), strings.IndexByte(s, '>')
	if open < 0 || close < open {
		return nil
	}
	if close == open+1 {
		return nil
	}
	return strings.Split(s[open+1:close], ",")
}

// ifaceWant is what an interface must have.
type ifaceWant struct {
	Name   string
	Create []string // ifconfig arguments creating it
	MTU    int
	Addrs  []netip.Prefix
}

// planIface returns the ifconfig commands that bring an interface from what
// it has (nil: missing) to what it must have. An address already there is
// never set again: ifconfig replaces an address even with itself, and the
// routes through the interface go with it for that moment (5.4). Any other
// address but a link-local one goes: the interfaces are Legion's, and an
// address of a subnet this node held before (removed and joined again, or
// a restored cluster) would route that subnet here rather than to the
// node that holds it now.
func planIface(have *ifaceInfo, w ifaceWant) [][]string {
	var cmds [][]string
	fresh := have == nil
	if fresh {
		cmds = append(cmds, w.Create)
		have = &ifaceInfo{Name: w.Name}
	}
	if w.MTU != 0 && have.MTU != w.MTU {
		cmds = append(cmds, []string{w.Name, "mtu", strconv.Itoa(w.MTU)})
	}
	v6 := false
	for _, p := range w.Addrs {
		fam := "inet"
		if p.Addr().Is6() {
			fam, v6 = "inet6", true
		}
		if !have.has(p) {
			cmds = append(cmds, []string{w.Name, fam, p.String(), "alias"})
		}
	}
	for _, p := range have.Addrs {
		a := p.Addr()
		if a.IsLinkLocalUnicast() || slices.ContainsFunc(w.Addrs, func(q netip.Prefix) bool { return q.Addr() == a }) {
			continue
		}
		fam := "inet"
		if a.Is6() {
			fam = "inet6"
		}
		cmds = append(cmds, []string{w.Name, fam, a.String(), "-alias"})
	}
	if v6 && (fresh || hasWord(have.ND6, "IFDISABLED")) {
		cmds = append(cmds, []string{w.Name, "inet6", "-ifdisabled"})
	}
	if !hasWord(have.Flags, "UP") {
		cmds = append(cmds, []string{w.Name, "up"})
	}
	return cmds
}
