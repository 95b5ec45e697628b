package netbsd

import (
	"net/netip"
	"strings"
	"testing"
)

// What the parsers accept from FreeBSD's tools stays within what the
// numbers can mean: a prefix length of an address's family, a contiguous
// netmask, an MTU, a port.

func TestParseIfconfigBounds(t *testing.T) {
	t.Parallel()
	const head = "em0: flags=8843<UP,RUNNING> metric 0 mtu 1500\n"
	cases := []struct {
		name, line string
		want       string // the address read, or "" when the output must be refused
		err        string // what the refusal names
	}{
		{"v6 /128", "\tinet6 fd00::1 prefixlen 128\n", "fd00::1/128", ""},
		{"v6 /0", "\tinet6 fd00::1 prefixlen 0\n", "fd00::1/0", ""},
		{"v6 link-local", "\tinet6 fe80::1%em0 prefixlen 64 scopeid 0x1\n", "fe80::1/64", ""},
		{"v6 over 128", "\tinet6 fd00::1 prefixlen 129\n", "", "0..128"},
		{"v6 far over 128", "\tinet6 ::0 prefixlen 9999999\n", "", "0..128"},
		{"v6 negative", "\tinet6 fd00::1 prefixlen -1\n", "", "0..128"},
		{"v6 line with a v4 address", "\tinet6 10.0.0.1 prefixlen 24\n", "", "not IPv6"},
		{"v4 /24", "\tinet 10.0.0.1 netmask 0xffffff00 broadcast 10.0.0.255\n", "10.0.0.1/24", ""},
		{"v4 /32", "\tinet 10.0.0.1 netmask 0xffffffff\n", "10.0.0.1/32", ""},
		{"v4 /0", "\tinet 10.0.0.1 netmask 0x0\n", "10.0.0.1/0", ""},
		{"v4 mask with a hole", "\tinet 10.0.0.1 netmask 0xff00ff00\n", "", "not contiguous"},
		{"v4 mask ones at the end", "\tinet 10.0.0.1 netmask 0x000000ff\n", "", "not contiguous"},
		{"v4 mask over 32 bits", "\tinet 10.0.0.1 netmask 0x1ffffffff\n", "", "netmask"},
		{"v4 mask without 0x", "\tinet 10.0.0.1 netmask ffffff00\n", "", "netmask"},
		{"v4 line with a v6 address", "\tinet fd00::1 netmask 0xffffff00\n", "", "not IPv4"},
		{"v4 line with a mapped address", "\tinet ::ffff:10.0.0.1 netmask 0xffffff00\n", "", "not IPv4"},
	}
	for _, c := range cases {
		ifs, err := parseIfconfig(head + c.line)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: accepted as %+v, want a refusal", c.name, ifs)
			} else if !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "line 2") {
				t.Errorf("%s: error %q does not name line 2 and %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(ifs) != 1 || len(ifs[0].Addrs) != 1 || ifs[0].Addrs[0] != netip.MustParsePrefix(c.want) {
			t.Errorf("%s: read %+v, want %s", c.name, ifs, c.want)
		}
	}
}

func TestParseIfconfigMTU(t *testing.T) {
	t.Parallel()
	for _, mtu := range []string{"x", "0", "-1", "65536"} {
		out := "em0: flags=8843<UP,RUNNING> metric 0 mtu " + mtu + "\n"
		if ifs, err := parseIfconfig(out); err == nil {
			t.Errorf("mtu %s accepted as %+v", mtu, ifs)
		} else if !strings.Contains(err.Error(), "mtu") || !strings.Contains(err.Error(), "1..65535") {
			t.Errorf("mtu %s: error %q names neither the field nor the limit", mtu, err)
		}
	}
	ifs, err := parseIfconfig("em0: flags=8843<UP,RUNNING> metric 0 mtu 65535\n")
	if err != nil || ifs[0].MTU != 65535 {
		t.Errorf("mtu 65535: %+v, %v", ifs, err)
	}
}

func TestParseStatesBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, host string
		ok         bool
	}{
		{"v4 with a port", "10.200.1.20:8080", true},
		{"v6 with a port", "fd00:10:200:1::14[8080]", true},
		{"v4 without a port", "10.200.1.20", true},
		{"v6 without a port", "fd00:10:200:1::14", true},
		{"v4 port over 65535", "10.200.1.20:65536", false},
		{"v6 port over 65535", "fd00:10:200:1::14[99999]", false},
		{"v4 empty port", "10.200.1.20:", false},
		{"v6 port not closed", "fd00:10:200:1::14[80", false},
		{"v6 port with v4 syntax", "fd00::1:80x", false},
		{"v4 port with v6 syntax", "10.200.1.20[80]", false},
	}
	for _, c := range cases {
		line := "all tcp " + c.host + " <- 10.200.3.40:41234       ESTABLISHED:ESTABLISHED\n"
		states, err := parseStates(line)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.ok && (len(states) != 1 || states[0].A.Text != c.host || !states[0].A.Addr.IsValid()):
			t.Errorf("%s: read %+v", c.name, states)
		case !c.ok && err == nil:
			t.Errorf("%s: accepted as %+v, want a refusal", c.name, states)
		case !c.ok && !strings.Contains(err.Error(), c.host):
			t.Errorf("%s: error %q does not name the host", c.name, err)
		}
	}
}

func TestParseAddrSelectionBounds(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"::1/129", "::/-1", "10.0.0.0/8", "fe80::", "x/0"} {
		out := "Prefix Prec Label Use\n" + prefix + " 50 0 0\n"
		if tab, err := parseAddrSelection(out); err == nil {
			t.Errorf("prefix %s accepted as %+v", prefix, tab)
		} else if !strings.Contains(err.Error(), "prefix") || !strings.Contains(err.Error(), "0..128") {
			t.Errorf("prefix %s: error %q names neither the field nor the limit", prefix, err)
		}
	}
	tab, err := parseAddrSelection(ip6addrctlOut)
	if err != nil || len(tab) != 3 || tab[2].Prefix != "::ffff:0.0.0.0/96" {
		t.Errorf("FreeBSD's table: %+v, %v", tab, err)
	}
}
