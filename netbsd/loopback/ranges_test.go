package loopback

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/legionbsd/legion/netbsd/addrplan"
)

func TestProcAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1",
		"0101C87F:0035":                         "127.200.1.1",
		"0000000000000000FFFF00000101C87F:0035": "::ffff:127.200.1.1",
		"00000000000000000000000001000000:0035": "::1",
	} {
		a, ok := procAddr(in)
		if !ok || a != netip.MustParseAddr(want) {
			t.Errorf("procAddr(%s) = %s, %v; want %s", in, a, ok, want)
		}
	}
}

func TestUsedOctetsSeesSockets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tcp := "  sl  local_address rem_address   st\n   0: 0101C87F:0035 00000000:0000 0A\n"
	udp6 := "  sl  local_address rem_address   st\n   0: 0000000000000000FFFF00000101177F:0035 00000000000000000000000000000000:0000 07\n"
	for f, body := range map[string]string{"tcp": tcp, "udp6": udp6} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	used, err := UsedOctets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !used[200] || !used[23] || !used[0] || used[42] {
		t.Errorf("used = %v; want 0, 23 and 200, not 42", used)
	}
}

// A real socket on 127.X shows in the host's tables (Linux).
func TestUsedOctetsSeesThisHost(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/net, which only Linux has")
	}
	var l net.Listener
	var octet byte
	for o := byte(251); o > 240; o-- { // any 127/8 address answers on Linux
		var err error
		if l, err = net.Listen("tcp", net.JoinHostPort(netip.AddrFrom4([4]byte{127, o, 9, 9}).String(), "0")); err == nil {
			octet = o
			break
		}
	}
	if l == nil {
		t.Fatal("could not listen on any of 127.241-251.9.9")
	}
	t.Cleanup(func() { l.Close() })
	used, err := UsedOctets(ProcNet)
	if err != nil {
		t.Fatal(err)
	}
	if !used[octet] {
		t.Errorf("a listener on 127.%d.9.9 is not seen as used: %v", octet, used)
	}
}

func TestFreePlanSkipsUsedRanges(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	// Pair k=1 (10.2, 10.3) has its service image in use, k=2 (10.4,
	// 10.5) overlaps a host network: k=3 is the first free pair.
	used := map[byte]bool{0: true, 3: true}
	got, err := FreePlan(addrplan.Plan{}, used, []netip.Prefix{pfx("10.5.1.0/24")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (addrplan.Plan{Pod: pfx("10.6.0.0/16"), Service: pfx("10.7.0.0/16")}); got != want {
		t.Errorf("FreePlan = %v; want %v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
	// A given range is kept; only the other is chosen, never the same.
	got, err = FreePlan(addrplan.Plan{Pod: pfx("10.8.0.0/16")}, map[byte]bool{}, nil, 3)
	if err != nil || got.Pod != pfx("10.8.0.0/16") || got.Service != pfx("10.9.0.0/16") {
		t.Errorf("FreePlan(pod given) = %v, %v", got, err)
	}
	// The start spreads clusters over the candidates.
	a, _ := FreePlan(addrplan.Plan{}, map[byte]bool{}, nil, 10)
	b, _ := FreePlan(addrplan.Plan{}, map[byte]bool{}, nil, 11)
	if a.Pod == b.Pod || a.Pod.Overlaps(b.Service) || b.Pod.Overlaps(a.Service) {
		t.Errorf("starts 10 and 11 gave overlapping plans %v and %v", a, b)
	}
	all := map[byte]bool{}
	for o := range 256 {
		all[byte(o)] = true
	}
	if _, err := FreePlan(addrplan.Plan{}, all, nil, 0); err == nil || !strings.Contains(err.Error(), "give --pod-cidr and --service-cidr") {
		t.Errorf("FreePlan on a full host = %v", err)
	}
}
