package netbsd

import (
	"net/netip"
	"strings"
	"testing"
)

// The parsers read what FreeBSD tools print; whatever they are given, they
// return an error rather than panic, and what they accept is consistent.

func FuzzParseIfconfig(f *testing.F) {
	f.Add(bridgeUp)
	f.Add(wgUp + bridgeNew)
	f.Add("x: flags=0<> mtu\n\tinet 1.2.3.4 netmask 0xzz\n")
	f.Fuzz(func(t *testing.T, out string) {
		ifs, err := parseIfconfig(out)
		if err != nil {
			return
		}
		for _, i := range ifs {
			if i.MTU < 0 || i.MTU > maxMTU {
				t.Fatalf("mtu %d accepted from %q", i.MTU, out)
			}
			for _, a := range i.Addrs {
				if !a.IsValid() {
					t.Fatalf("invalid prefix accepted from %q", out)
				}
			}
		}
	})
}

func FuzzParseWGDump(f *testing.F) {
	f.Add("PRIV\tPUB1\t51820\toff\nPUB2\t(none)\t[2001:db8::2]:51820\t10.200.2.0/24,100.64.2.1/32\t0\t0\t0\toff\n")
	f.Add("a\nb\tc\n")
	f.Fuzz(func(t *testing.T, out string) {
		peers, err := parseWGDump(out)
		if err != nil {
			return
		}
		for _, p := range peers {
			if p.Keepalive < 0 || p.Keepalive > 65535 {
				t.Fatalf("keepalive %d", p.Keepalive)
			}
		}
	})
}

func FuzzParseStates(f *testing.F) {
	f.Add("all tcp 10.200.1.20:8080 (10.201.0.5:80) <- 10.200.3.40:41234       ESTABLISHED:ESTABLISHED\n")
	f.Add("all tcp fd00:10:200:1::14[8080] (fd00:10:201::5[80]) <- fd00:10:200:3::28[41236] X\n")
	f.Add("all tcp 100.64.3.1:61000 (198.51.100.9:5555) -> 10.200.1.20:8080 X\n")
	f.Fuzz(func(t *testing.T, out string) {
		states, err := parseStates(out)
		if err != nil {
			return
		}
		for _, s := range states {
			if k := strings.Fields(s.key()); len(k) != 4 || (k[2] != "<-" && k[2] != "->") {
				t.Fatalf("key %q is not \"proto host dir host\"", s.key())
			}
			// What goes back to pfctl reads again as the same host.
			for _, h := range []pfHost{s.A, s.B} {
				if again, err := parsePFHost(h.Text); err != nil || again.Addr != h.Addr {
					t.Fatalf("host %q reads again as %v, %v", h.Text, again.Addr, err)
				}
			}
		}
	})
}

func FuzzParseAddrSelection(f *testing.F) {
	f.Add(ip6addrctlOut)
	f.Add("Prefix Prec\n::1/128 x 0\n")
	f.Fuzz(func(t *testing.T, out string) {
		tab, err := parseAddrSelection(out)
		if err != nil {
			return
		}
		for _, p := range tab {
			if pre, err := netip.ParsePrefix(p.Prefix); err != nil || !pre.Addr().Is6() {
				t.Fatalf("prefix %q accepted from %q", p.Prefix, out)
			}
		}
	})
}
