package netbsd

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

const bridgeUp = `legion0: flags=1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP> metric 0 mtu 1420
	options=0
	ether 58:9c:fc:10:ff:b6
	inet 10.200.3.1 netmask 0xffffff00 broadcast 10.200.3.255
	inet6 fe80::5a9c:fcff:fe10:ffb6%legion0 prefixlen 64 scopeid 0x5
	inet6 fd00:10:200:3::1 prefixlen 64
	id 00:00:00:00:00:00 priority 32768 hellotime 2 fwddelay 15
	member: lp00000000a017 flags=143<LEARNING,DISCOVER,AUTOEDGE,AUTOPTP>
	        ifmaxaddr 0 port 6 priority 128 path cost 2000
	groups: bridge
	nd6 options=21<PERFORMNUD,AUTO_LINKLOCAL>
`

const bridgeNew = `legion0: flags=8802<BROADCAST,SIMPLEX,MULTICAST> metric 0 mtu 1500
	ether 58:9c:fc:10:ff:b6
	nd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>
`

const wgUp = `wg0: flags=10080c1<UP,RUNNING,NOARP,MULTICAST,LOWER_UP> metric 0 mtu 1420
	options=80000<LINKSTATE>
	inet 100.64.3.1 netmask 0xffff0000
	inet6 fd00:100:64::3:1 prefixlen 96
	groups: wg
	nd6 options=101<PERFORMNUD,NO_DAD>
`

const ip6addrctlOut = `Prefix                          Prec Label      Use
::1/128                           50     0        0
::/0                              40     1        0
::ffff:0.0.0.0/96                100     4        0
`

func TestParseIfconfig(t *testing.T) {
	t.Parallel()
	ifs, err := parseIfconfig(bridgeUp + wgUp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) != 2 {
		t.Fatalf("%d interfaces", len(ifs))
	}
	b := ifs[0]
	want := []netip.Prefix{
		netip.MustParsePrefix("10.200.3.1/24"), netip.MustParsePrefix("fe80::5a9c:fcff:fe10:ffb6/64"), netip.MustParsePrefix("fd00:10:200:3::1/64"),
	}
	if d := cmp.Diff(want, b.Addrs, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("addrs (-want +got):\n%s", d)
	}
	if b.Ether != "58:9c:fc:10:ff:b6" || b.MTU != 1420 || !hasWord(b.Flags, "UP") || len(b.Members) != 1 || b.Members[0] != "lp00000000a017" {
		t.Errorf("bridge %+v", b)
	}
	if ifs[1].Addrs[0] != netip.MustParsePrefix("100.64.3.1/16") {
		t.Errorf("wg0 %+v", ifs[1])
	}
	if _, err := parseIfconfig("\tinet 1.2.3.4 netmask 0xff000000\n"); err == nil {
		t.Error("an address before any interface must be refused")
	}
}

// On a fresh host everything is made; on a host already set up (agent
// restart, upgrade) nothing is set again, in particular no address
// (ifconfig inet replaces an address even with itself, 5.4).
func TestSetUpNodeGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := filepath.Join(t.TempDir(), "wireguard.key")
	var d doc

	fresh := sys.NewFake()
	reads(fresh, "ifconfig legion0", sys.Answer{Code: 1, Stderr: "ifconfig: interface legion0 does not exist\n"}, sys.Answer{Stdout: bridgeNew})
	reads(fresh, "ifconfig wg0", sys.Answer{Code: 1, Stderr: "ifconfig: interface wg0 does not exist\n"})
	fresh.On("ifconfig bridge create", sys.Answer{Stdout: "legion0\n"}).
		On("wg genkey", sys.Answer{Stdout: "UFJJVjM=\n"}).
		On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
		On("wg show wg0 dump", sys.Answer{Stdout: "(none)\t(none)\t0\toff\n"}).
		On("ip6addrctl show", sys.Answer{Stdout: ip6addrctlOut})
	h := Host{R: fresh, Log: quiet()}
	cfg := NodeConfig{Subnet: 3, KeyPath: key}
	nn, err := h.SetUpNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if nn.BridgeEther != "58:9c:fc:10:ff:b6" || nn.PublicKey != "PUB3" || len(nn.AddrSelection) != 3 {
		t.Errorf("node net %+v", nn)
	}
	d.section("fresh host", strings.ReplaceAll(transcript(fresh.Calls()), key, "/var/db/legion/wireguard.key"))

	again := sys.NewFake()
	reads(again, "ifconfig legion0", sys.Answer{Stdout: bridgeUp})
	reads(again, "ifconfig wg0", sys.Answer{Stdout: wgUp})
	again.
		On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
		On("wg show wg0 dump", sys.Answer{Stdout: "UFJJVjM=\tPUB3\t51820\toff\n"}).
		On("route -n add -net", sys.RouteExists("10.200.0.0/16", "wg0")).
		On("route -n add -inet6", sys.RouteExists("fd00:10:200::/48", "wg0")).
		On("ip6addrctl show", sys.IP6AddrctlNone())
	h.R = again
	nn, err = h.SetUpNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(nn.AddrSelection) == 0 || nn.AddrSelection[2].Prefix != "::ffff:0.0.0.0/96" || nn.AddrSelection[2].Precedence != 100 {
		t.Errorf("a host without a table must give pods the IPv4-preferring one: %+v", nn.AddrSelection)
	}
	d.section("host already set up", transcript(again.Calls()))
	for _, l := range again.Lines() {
		if strings.Contains(l, " inet ") || strings.Contains(l, " inet6 ") || strings.Contains(l, "create") || strings.Contains(l, "private-key") {
			t.Errorf("set up again: %q", l)
		}
	}

	// A node given another subnet than the one it held (removed and
	// joined again, a restored cluster) drops the old addresses, whose
	// routes would keep that subnet here.
	moved := sys.NewFake()
	reads(moved, "ifconfig legion0", sys.Answer{Stdout: strings.NewReplacer("10.200.3.", "10.200.7.", "fd00:10:200:3::", "fd00:10:200:7::").Replace(bridgeUp)})
	reads(moved, "ifconfig wg0", sys.Answer{Stdout: strings.NewReplacer("100.64.3.1", "100.64.7.1", "fd00:100:64::3:1", "fd00:100:64::7:1").Replace(wgUp)})
	moved.
		On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
		On("wg show wg0 dump", sys.Answer{Stdout: "UFJJVjM=\tPUB3\t51820\toff\n"}).
		On("route -n add -net", sys.RouteExists("10.200.0.0/16", "wg0")).
		On("route -n add -inet6", sys.RouteExists("fd00:10:200::/48", "wg0")).
		On("ip6addrctl show", sys.Answer{Stdout: ip6addrctlOut})
	h.R = moved
	if _, err := h.SetUpNode(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d.section("node given another subnet", transcript(moved.Calls()))
	for _, want := range []string{"ifconfig legion0 inet 10.200.3.1/24 alias", "ifconfig legion0 inet 10.200.7.1 -alias",
		"ifconfig legion0 inet6 fd00:10:200:7::1 -alias", "ifconfig wg0 inet 100.64.7.1 -alias", "ifconfig wg0 inet6 fd00:100:64::7:1 -alias"} {
		if !slices.Contains(moved.Lines(), want) {
			t.Errorf("set up on another subnet: no %q in %q", want, moved.Lines())
		}
	}
	for _, l := range moved.Lines() {
		if strings.Contains(l, "fe80:") {
			t.Errorf("set up on another subnet touched the link-local address: %q", l)
		}
	}
	golden(t, "node_setup", d.String())
}

// reads scripts the answers to a read command given exactly (the Fake
// matches by prefix): longer commands starting with it succeed silently,
// the read gets the answers in turn, the last one from then on.
func reads(f *sys.Fake, cmd string, answers ...sys.Answer) *sys.Fake {
	f.On(cmd+" ", sys.Answer{})
	for i, a := range answers {
		if i == len(answers)-1 {
			f.On(cmd, a)
		} else {
			f.Once(cmd, a)
		}
	}
	return f
}

func TestHostIfName(t *testing.T) {
	t.Parallel()
	for uid, want := range map[string]string{
		"7f3c2a10-8e4b-4d2a-9c1e-0123456789AB": "lp0123456789ab",
		"0000000000000000000000000000a017":     "lp00000000a017",
	} {
		got, err := HostIfName(uid)
		if err != nil || got != want {
			t.Errorf("HostIfName(%q) = %q, %v; want %q", uid, got, err, want)
		}
	}
	for _, bad := range []string{"abc", "zzzzzzzzzzzzzzzz"} {
		if _, err := HostIfName(bad); err == nil {
			t.Errorf("HostIfName(%q) must fail", bad)
		}
	}
}

func labNodeNet() NodeNet {
	return NodeNet{Subnet: 3, BridgeEther: "58:9c:fc:10:ff:b6", AddrSelection: []AddrPolicy{{"::1/128", 50, 0}, {"::ffff:0.0.0.0/96", 100, 4}}}
}

func labPod() Pod {
	return Pod{TaskUID: "0000000000000000000000000000a017", Namespace: "shop", Service: "web", Jail: "legion-a017", Addr: addr("10.200.3.17")}
}

func TestPodJoinAndLeaveGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var d doc
	f := reads(sys.NewFake(), "ifconfig lp00000000a017", sys.Answer{Code: 1, Stderr: "ifconfig: interface lp00000000a017 does not exist\n"}).
		On("ifconfig epair create", sys.Answer{Stdout: "epair7a\n"})
	h := Host{R: f, Log: quiet()}
	if err := h.JoinPod(ctx, labPod(), labNodeNet()); err != nil {
		t.Fatal(err)
	}
	d.section("new pod", transcript(f.Calls()))

	jailOut := `lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> metric 0 mtu 16384
	inet 127.0.0.1 netmask 0xff000000
epair7b: flags=8863<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST> metric 0 mtu 1420
	ether 02:a0:98:c1:2e:0b
	inet 10.200.3.17 netmask 0xffffff00 broadcast 10.200.3.255
	nd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>
`
	f = reads(sys.NewFake(), "ifconfig lp00000000a017", sys.Answer{Stdout: "lp00000000a017: flags=8863<UP> metric 0 mtu 1420\n\tether 58:9c:fc:10:ff:b6\n"})
	reads(f, "ifconfig -j legion-a017", sys.Answer{Stdout: jailOut})
	h.R = f
	if err := h.JoinPod(ctx, labPod(), labNodeNet()); err != nil {
		t.Fatal(err)
	}
	d.section("adopted after restart, IPv6 twin missing", transcript(f.Calls()))

	f = sys.NewFake().On("ifconfig lp00000000a017 destroy", sys.Answer{Code: 1, Stderr: "ifconfig: interface lp00000000a017 does not exist\n"})
	reads(f, "ifconfig lp00000000a017", sys.Answer{Stdout: "lp00000000a017: flags=8863<UP> metric 0 mtu 1420\n"})
	reads(f, "ifconfig -j legion-a017", sys.Answer{Stdout: "lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> metric 0 mtu 16384\n"})
	f.On("ifconfig epair create", sys.Answer{Stdout: "epair9a\n"})
	h.R = f
	if err := h.JoinPod(ctx, labPod(), labNodeNet()); err != nil {
		t.Fatal(err)
	}
	lines := f.Lines()
	if lines[2] != "ifconfig lp00000000a017 destroy" || lines[3] != "ifconfig epair create" {
		t.Errorf("a half-made pod must be destroyed, host end first, and made again: %q", lines)
	}

	f = sys.NewFake().On("ifconfig lp00000000a017 destroy", sys.Answer{Code: 1, Stderr: "ifconfig: interface lp00000000a017 does not exist\n"})
	h.R = f
	if err := h.LeavePod(ctx, labPod().TaskUID); err != nil {
		t.Fatalf("a host end already gone is success: %v", err)
	}
	d.section("pod leaves", transcript(f.Calls()))
	golden(t, "pod_join_leave", d.String())

	bad := labPod()
	bad.Addr = addr("10.200.4.17")
	if err := h.JoinPod(ctx, bad, labNodeNet()); err == nil {
		t.Error("an address outside the node subnet must be refused")
	}
}

// route(8) words a refusal from the errno it got; over netlink that code
// may not be EEXIST's. A failed add is then checked against the table:
// the route through wg0 is there (daemon restart) or the add failed.
func TestSetUpNodeRouteFailureCheckedAgainstTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := filepath.Join(t.TempDir(), "wireguard.key")
	if err := os.WriteFile(key, []byte("UFJJVjM=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := func(get4 sys.Answer) *sys.Fake {
		f := sys.NewFake()
		reads(f, "ifconfig legion0", sys.Answer{Stdout: bridgeUp})
		reads(f, "ifconfig wg0", sys.Answer{Stdout: wgUp})
		f.On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
			On("wg show wg0 dump", sys.Answer{Stdout: "UFJJVjM=\tPUB3\t51820\toff\n"}).
			On("route -n add -net", sys.RouteErrno("10.200.0.0/16", "wg0", "Unknown error: 0")).
			On("route -n add -inet6", sys.RouteExists("fd00:10:200::/48", "wg0")).
			On("route -n get -net", get4).
			On("ip6addrctl show", sys.Answer{Stdout: ip6addrctlOut})
		return f
	}
	there := host(sys.Answer{Stdout: "   route to: 10.200.0.0\ndestination: 10.200.0.0\n       mask: 255.255.0.0\n        fib: 0\n  interface: wg0\n      flags: <UP,DONE,STATIC>\n"})
	if _, err := (Host{R: there, Log: quiet()}).SetUpNode(ctx, NodeConfig{Subnet: 3, KeyPath: key}); err != nil {
		t.Fatalf("the route is in the table through wg0: %v", err)
	}
	if !slicesContains(there.Lines(), "route -n get -net 10.200.0.0/16") {
		t.Errorf("the failed add was not checked against the table: %q", there.Lines())
	}
	elsewhere := host(sys.Answer{Stdout: "   route to: 10.200.0.0\ndestination: default\n       mask: default\n    gateway: 192.0.2.1\n        fib: 0\n  interface: em0\n"})
	_, err := (Host{R: elsewhere, Log: quiet()}).SetUpNode(ctx, NodeConfig{Subnet: 3, KeyPath: key})
	if err == nil || !strings.Contains(err.Error(), "Unknown error: 0") {
		t.Fatalf("a failed add with no route through wg0 must fail naming route's answer, got %v", err)
	}
}

func slicesContains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// A host with no address selection table: ip6addrctl says so on standard
// output and succeeds; pods get the IPv4-preferring table.
func TestParseAddrSelectionNoPolicy(t *testing.T) {
	t.Parallel()
	got, err := parseAddrSelection(sys.IP6AddrctlNone().Stdout)
	if err != nil || len(got) != 0 {
		t.Fatalf("no policy installed: got %v, %v; want an empty table", got, err)
	}
	if _, err := parseAddrSelection("no idea what this is\n"); err == nil {
		t.Fatal("other text must still be refused")
	}
}

// FreeBSD 15's bridge refuses members that carry addresses, and a host
// giving new interfaces an IPv6 link-local would give one to a pod's host
// end as it comes up: IPv6 is off on it before it is up and added.
func TestPodHostEndHasNoIPv6BeforeAddm(t *testing.T) {
	t.Parallel()
	pod := Pod{TaskUID: "t", Jail: "pod1", HostIf: "lp00000000a017", Addr: netip.MustParseAddr("10.200.3.17")}
	cmds := planPodJoin(pod, "epair7a", NodeNet{Subnet: 3, BridgeEther: "58:9c:fc:10:ff:b6"})
	off, up, addm := -1, -1, -1
	for i, c := range cmds {
		line := strings.Join(c, " ")
		switch {
		case line == "ifconfig lp00000000a017 inet6 -auto_linklocal ifdisabled":
			off = i
		case strings.HasPrefix(line, "ifconfig lp00000000a017 ") && strings.HasSuffix(line, " up"):
			up = i
		case line == "ifconfig legion0 addm lp00000000a017":
			addm = i
		}
	}
	if off < 0 || up < 0 || addm < 0 || off > up || off > addm {
		t.Fatalf("host end: inet6 off at %d, up at %d, addm at %d; want inet6 off first in %q", off, up, addm, cmds)
	}
}
