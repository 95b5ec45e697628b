package netbsd

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// wgDump renders `wg show wg0 dump` for peers that have the allowed IPs
// Legion gives them.
func wgDump(peers ...WGPeer) string {
	var b strings.Builder
	b.WriteString("PRIV1\tPUB1\t51820\toff\n")
	for _, p := range peers {
		ep := "(none)"
		if p.Endpoint.IsValid() {
			ep = p.Endpoint.String()
		}
		ka := "off"
		if p.Keepalive != 0 {
			ka = "25"
		}
		b.WriteString(strings.Join([]string{p.PublicKey, "(none)", ep, joinPrefixes(p.AllowedIPs), "1764547200", "1024", "2048", ka}, "\t") + "\n")
	}
	return b.String()
}

func asPeer(n Node, learned netip.AddrPort) WGPeer {
	return WGPeer{PublicKey: n.PublicKey, Endpoint: learned, AllowedIPs: PeerAllowedIPs(addrplan.Plan{}, n), Keepalive: Keepalive}
}

// A node joining is one `wg set`; a node leaving is one remove; peers that
// did not change are not touched, and an endpoint WireGuard learned (NAT)
// stands unless the peer advertises another.
func TestNodeJoinAndLeaveGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := labNodes()
	n4 := Node{Name: "n4", Subnet: 4, PublicKey: "PUB4", Endpoint: netip.MustParseAddrPort("192.0.2.4:51820")}
	natted := netip.MustParseAddrPort("203.0.113.9:40001") // n3 as WireGuard saw it through its NAT
	f := sys.NewFake()
	m := &Mesh{R: f, Self: "n1"}
	var d doc

	f.Once("wg show wg0 dump", sys.Answer{Stdout: wgDump(asPeer(nodes[1], nodes[1].Endpoint), asPeer(nodes[2], natted))})
	done, err := m.Converge(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("restarted agent with the same peers changed %q", done)
	}
	d.section("agent restart, same peers", transcript(f.Calls()))
	f.Reset()

	f.Once("wg show wg0 dump", sys.Answer{Stdout: wgDump(asPeer(nodes[1], nodes[1].Endpoint), asPeer(nodes[2], natted))})
	joined := append(append([]Node(nil), nodes...), n4)
	if _, err := m.Converge(ctx, joined); err != nil {
		t.Fatal(err)
	}
	d.section("n4 joins", transcript(f.Calls()))
	f.Reset()

	f.Once("wg show wg0 dump", sys.Answer{Stdout: wgDump(asPeer(nodes[1], nodes[1].Endpoint), asPeer(nodes[2], natted), asPeer(n4, n4.Endpoint))})
	left := []Node{nodes[0], nodes[2], n4}
	if _, err := m.Converge(ctx, left); err != nil {
		t.Fatal(err)
	}
	d.section("n2 leaves", transcript(f.Calls()))
	f.Reset()

	f.Once("wg show wg0 dump", sys.Answer{Stdout: wgDump(asPeer(nodes[2], natted), asPeer(n4, n4.Endpoint))})
	moved := []Node{nodes[0], nodes[2], n4}
	moved[1].Endpoint = netip.MustParseAddrPort("192.0.2.33:51820")
	if _, err := m.Converge(ctx, moved); err != nil {
		t.Fatal(err)
	}
	d.section("n3 advertises another endpoint", transcript(f.Calls()))
	f.Reset()

	if _, err := m.Converge(ctx, nil); err != nil || len(f.Calls()) != 0 {
		t.Errorf("no peer list yet must touch nothing: %v %q", err, f.Lines())
	}
	golden(t, "node_join_leave", d.String())
}

func TestPlanPeersFixesDrift(t *testing.T) {
	t.Parallel()
	nodes := labNodes()
	drifted := asPeer(nodes[1], nodes[1].Endpoint)
	drifted.AllowedIPs = drifted.AllowedIPs[:1]
	drifted.Keepalive = 0
	cmds, _ := PlanPeers(addrplan.Plan{}, "n1", []WGPeer{drifted, asPeer(nodes[2], nodes[2].Endpoint)}, nodes, map[string]netip.AddrPort{"PUB2": nodes[1].Endpoint, "PUB3": nodes[2].Endpoint})
	want := [][]string{{"set", "wg0", "peer", "PUB2", "persistent-keepalive", "25", "allowed-ips", "10.200.2.0/24,fd00:10:200:2::/64,100.64.2.1/32,fd00:100:64::2:1/128"}}
	if d := cmp.Diff(want, cmds); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseWGDump(t *testing.T) {
	t.Parallel()
	out := "PRIV\tPUB1\t51820\toff\nPUB2\t(none)\t[2001:db8::2]:51820\t10.200.2.0/24,100.64.2.1/32\t0\t0\t0\toff\nPUB3\t(none)\t(none)\t(none)\t0\t0\t0\t25\n"
	got, err := parseWGDump(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []WGPeer{
		{PublicKey: "PUB2", Endpoint: netip.MustParseAddrPort("[2001:db8::2]:51820"), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.200.2.0/24"), netip.MustParsePrefix("100.64.2.1/32")}},
		{PublicKey: "PUB3", Keepalive: 25},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := parseWGDump("x\nPUB2\tonly\n"); err == nil {
		t.Error("a short line must be refused")
	}
}

func TestEnsureKeyMakesKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "wireguard.key")
	f := sys.NewFake().On("wg genkey", sys.Answer{Stdout: "cHJpdmF0ZQ==\n"}).On("wg pubkey", sys.Answer{Stdout: "cHVibGlj\n"})
	pub, err := EnsureKey(ctx, f, path)
	if err != nil || pub != "cHVibGlj" {
		t.Fatalf("pub %q err %v", pub, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v mode %v, expected 0600", err, st.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != "cHJpdmF0ZQ==\n" {
		t.Errorf("key file holds %q", b)
	}
	calls := f.Calls()
	if len(calls) != 2 || string(calls[1].Stdin) != "cHJpdmF0ZQ==\n" {
		t.Fatalf("calls %q", f.Lines())
	}
	f.Reset()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureKey(ctx, f, path); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"wg pubkey"}, f.Lines()); d != "" {
		t.Errorf("second start must reuse the key (-want +got):\n%s", d)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v not put back to 0600", st.Mode().Perm())
	}
}
