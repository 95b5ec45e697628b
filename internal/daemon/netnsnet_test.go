package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

func fakeNetNS(f *sys.Fake) *NetNSNetwork {
	return &NetNSNetwork{R: f, Log: quietLog(), Subnet: netip.MustParsePrefix("10.200.3.0/24"), Gateway: netip.MustParseAddr("10.200.3.1"),
		names: netnsNames{"ab12c"}, eps: &Endpoints{Local: func(a netip.Addr) netip.Addr { return a }},
		pool: LoopbackNetwork{Subnet: netip.MustParsePrefix("10.200.3.0/24")}, vips: map[netip.Addr]bool{}}
}

// A pod's namespace and veth pair are made with these commands: the pod
// end moved into the namespace at birth, renamed eth0 there and given the
// pod's address and a default route through the gateway, in one ip(8)
// batch, then the host's neighbour entry for the address flushed (a pod
// gone may have left one); Detach removes both ends and the namespace and frees the
// address, tolerating what is already gone.
func TestNetNSNetworkJoinAndDetachCommands(t *testing.T) {
	t.Parallel()
	f := sys.NewFake().On("ip -o link show dev", sys.Answer{Code: 1, Stderr: `Device "x" does not exist.`}).
		On("ip link del", sys.Answer{Code: 1, Stderr: "Cannot find device"}).
		On("ip netns del", sys.Answer{Code: 1, Stderr: "Cannot remove namespace file: No such file or directory"})
	n := fakeNetNS(f)
	task := &legion.Task{}
	task.Metadata.UID = "00000000-0000-4000-8000-00000000002a"
	ip, err := n.Attach(context.Background(), task)
	if err != nil || ip != "10.200.3.2" {
		t.Fatalf("attach: %q %v, want the first free address 10.200.3.2", ip, err)
	}
	if err := n.Join(context.Background(), task, ip, true); err != nil {
		t.Fatal(err)
	}
	ns := "legion-ab12c-" + task.Metadata.UID
	want := []string{
		"ip link del lvab12c0000002a",
		"ip netns del " + ns,
		"ip netns add " + ns,
		"ip link add lvab12c0000002a type veth peer name lqab12c0000002a netns " + ns,
		"ip link set lvab12c0000002a master legionab12c up",
		"ip -n " + ns + " -batch -",
		"ip neigh flush to 10.200.3.2 dev legionab12c",
	}
	if diff := cmp.Diff(want, f.Lines()); diff != "" {
		t.Fatalf("join commands (-want +got):\n%s", diff)
	}
	calls := f.Calls()
	wantBatch := "link set lo up\nlink set dev lqab12c0000002a name eth0\naddr add 10.200.3.2/24 dev eth0\nlink set eth0 up\nroute add default via 10.200.3.1\n"
	if got := string(calls[len(calls)-2].Stdin); got != wantBatch {
		t.Fatalf("the pod's batch:\n%s\nwant:\n%s", got, wantBatch)
	}
	f.Reset()
	if err := n.Detach(context.Background(), task); err != nil {
		t.Fatalf("detach of what is gone: %v", err)
	}
	if diff := cmp.Diff([]string{"ip link del lvab12c0000002a", "ip netns del " + ns}, f.Lines()); diff != "" {
		t.Fatalf("detach commands (-want +got):\n%s", diff)
	}
	other := &legion.Task{}
	other.Metadata.UID = "00000000-0000-4000-8000-00000000002b"
	if ip, _ := n.Attach(context.Background(), other); ip != "10.200.3.2" {
		t.Fatalf("after detach the next pod got %s, want the freed 10.200.3.2", ip)
	}
	// A failed step undoes the ones before it.
	f2 := sys.NewFake().On("ip link add", sys.Answer{Code: 2, Stderr: "RTNETLINK answers: File exists"})
	n2 := fakeNetNS(f2)
	if err := n2.Join(context.Background(), task, "10.200.3.2", false); err == nil || !strings.Contains(err.Error(), "File exists") {
		t.Fatalf("join with a failing veth: %v, want its error", err)
	}
	lines := f2.Lines()
	if got := lines[len(lines)-2:]; !cmp.Equal(got, []string{"ip link del lvab12c0000002a", "ip netns del " + ns}) {
		t.Fatalf("after the failure: %q, want the veth and namespace removed", got)
	}
	// Outside the node's /24 nothing is made.
	f2.Reset()
	if err := n2.Join(context.Background(), task, "10.9.9.9", false); err == nil || len(f2.Lines()) != 0 {
		t.Fatalf("an address outside the subnet: %v after %q, want refused before any command", err, f2.Lines())
	}
}

// VIPs go on the bridge as /32s before their proxies listen, and come off
// once no service has them.
func TestNetNSNetworkPutsVIPsOnTheBridge(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	n := fakeNetNS(f)
	t.Cleanup(n.eps.Close)
	// 192.0.2.0/24 is on no interface here: the proxy fails to listen
	// and says so, which is not what this test looks at.
	svc := func(vip string) *endpoints.Service { return &endpoints.Service{VIP: vip} }
	n.Apply(context.Background(), []*endpoints.Service{svc("10.201.0.7"), svc("10.201.0.8"), {VIP: "10.201.0.9", DNSRR: true}}, nil)
	got := f.Lines()
	want := map[string]bool{"ip addr add 10.201.0.7/32 dev legionab12c": true, "ip addr add 10.201.0.8/32 dev legionab12c": true}
	if len(got) != 2 || !want[got[0]] || !want[got[1]] {
		t.Fatalf("first apply: %q, want the two VIPs (not the dnsrr one) added", got)
	}
	f.Reset()
	n.Apply(context.Background(), []*endpoints.Service{svc("10.201.0.8")}, nil)
	if diff := cmp.Diff([]string{"ip addr del 10.201.0.7/32 dev legionab12c"}, f.Lines()); diff != "" {
		t.Fatalf("second apply (-want +got):\n%s", diff)
	}
}

// The pod network asked for: loopback by default; auto falls back to it
// naming why namespaces cannot be made; netns refuses to start then; any
// other value is refused.
func TestChoosePodNetwork(t *testing.T) {
	t.Parallel()
	failing := sys.NewFake().On("ip netns add", sys.Answer{Code: 1, Stderr: "mount --make-shared /run/netns failed: Operation not permitted"})
	for _, tc := range []struct {
		asked, wantErr, wantLog string
		netns                   bool
	}{
		{asked: "", wantLog: "pod network loopback"},
		{asked: PodNetworkLoopback, wantLog: "pod network loopback"},
		{asked: PodNetworkAuto, wantLog: "why_not_netns="},
		{asked: PodNetworkNetNS, wantErr: "pod network netns: "},
		{asked: "vxlan", wantErr: `pod network "vxlan": expected auto, netns or loopback`},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		p := &platform{kind: PlatformProcess}
		err := p.choosePodNetwork(context.Background(), Options{PodNetwork: tc.asked, Runner: failing, DataDir: t.TempDir()}, log)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want an error with %q", tc.asked, err, tc.wantErr)
			}
			continue
		}
		if err != nil || p.netns != nil || !strings.Contains(buf.String(), tc.wantLog) {
			t.Errorf("%q: %v netns=%v log %q, want loopback saying %q", tc.asked, err, p.netns, buf.String(), tc.wantLog)
		}
	}
	// Where namespaces can be made (the fake answers yes), auto takes
	// them and the runtime gives members their pod's namespace.
	if netnsUsable(context.Background(), sys.NewFake(), netnsNames{"x"}) != "" {
		t.Skip("netns needs Linux as root; the rest holds only there")
	}
	p := &platform{kind: PlatformProcess, runtime: memRuntime{}}
	if err := p.choosePodNetwork(context.Background(), Options{PodNetwork: PodNetworkAuto, Runner: sys.NewFake(), DataDir: "/d"}, quietLog()); err != nil || p.netns == nil {
		t.Fatalf("auto where namespaces work: %v %v, want netns", err, p.netns)
	}
	if _, ok := p.runtime.(netnsRuntime); !ok {
		t.Fatalf("runtime %T, want the netns wrapper", p.runtime)
	}
}

type specRecorder struct {
	nodeRuntime
	specs []jail.ContainerSpec
}

func (r *specRecorder) Create(_ context.Context, s jail.ContainerSpec) error {
	r.specs = append(r.specs, s)
	return nil
}

// Members of a pod are created in its namespace; the infra container,
// which runs nothing, is not given one.
func TestNetNSRuntimeGivesMembersTheirPodsNamespace(t *testing.T) {
	t.Parallel()
	rec := &specRecorder{}
	rt := netnsRuntime{nodeRuntime: rec, names: netnsNames{"ab12c"}}
	rt.Create(context.Background(), jail.ContainerSpec{ID: "u1", Infra: true})
	rt.Create(context.Background(), jail.ContainerSpec{ID: "u1-web", Pod: "u1"})
	got := []string{rec.specs[0].NetNS, rec.specs[1].NetNS}
	if diff := cmp.Diff([]string{"", "/run/netns/legion-ab12c-u1"}, got); diff != "" {
		t.Fatalf("netns of infra and member (-want +got):\n%s", diff)
	}
}

// Pods reach past the host as a VNET jail's do: the node adds one
// MASQUERADE rule for its subnet (once: a restarted daemon finds it) and
// takes it away with its bridge.
func TestNetNSNetworkMasqueradesItsSubnet(t *testing.T) {
	t.Parallel()
	rule := "POSTROUTING -s 10.200.3.0/24 ! -o legionab12c -m comment --comment legionab12c -j MASQUERADE"
	f := sys.NewFake().Once("iptables -t nat -C", sys.Answer{Code: 1, Stderr: "iptables: Bad rule (does a matching rule exist in that chain?).\n"})
	n, err := NewNetNSNetwork(context.Background(), f, "ab12c", netip.MustParsePrefix("10.200.3.0/24"), netip.MustParseAddr("10.200.3.1"),
		&Endpoints{}, nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	var nat []string
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "iptables") {
			nat = append(nat, l)
		}
	}
	if diff := cmp.Diff([]string{"iptables -t nat -C " + rule, "iptables -t nat -S POSTROUTING", "iptables -t nat -A " + rule}, nat); diff != "" {
		t.Errorf("NAT at start (-want +got):\n%s", diff)
	}
	// Started again with the rule there: nothing added.
	again := sys.NewFake()
	if _, err := NewNetNSNetwork(context.Background(), again, "ab12c", n.Subnet, n.Gateway, &Endpoints{}, nil, quietLog()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(again.Lines(), "iptables -t nat -A "+rule) {
		t.Errorf("a restarted node added its NAT rule twice: %q", again.Lines())
	}
	// Removed with the bridge.
	// iptables -S prints the rule as it was added (comment before the
	// target), beside another node's.
	gone := sys.NewFake().On("iptables -t nat -S POSTROUTING", sys.Answer{Stdout: "-P POSTROUTING ACCEPT\n" +
		"-A POSTROUTING -s 10.200.3.0/24 ! -o legionab12c -m comment --comment legionab12c -j MASQUERADE\n" +
		"-A POSTROUTING -s 10.200.4.0/24 ! -o legionff000 -m comment --comment legionff000 -j MASQUERADE\n"})
	n.R = gone
	if err := n.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(gone.Lines(), func(l string) bool { return strings.Contains(l, "-D") && strings.Contains(l, "legionff000") }) {
		t.Errorf("Remove took another node's NAT rule: %q", gone.Lines())
	}
	if !slices.Contains(gone.Lines(), "iptables -t nat -D "+rule) {
		t.Errorf("the NAT rule stayed after Remove: %q", gone.Lines())
	}
}

// A node started on a bridge that holds the gateway of a subnet it held
// before (removed and joined again, a restored cluster) drops it and its
// NAT rule, whose route and rule would keep that subnet here, away from
// the node that holds it now; VIPs and the current gateway stay. The
// answers are ip(8)'s and iptables(8)'s as printed on Linux.
func TestNetNSNetworkDropsAFormerSubnet(t *testing.T) {
	t.Parallel()
	f := sys.NewFake().
		On("ip -o -4 addr show dev legionab12c", sys.Answer{Stdout: "" +
			"5589: legionab12c    inet 10.200.7.1/24 scope global legionab12c\\       valid_lft forever preferred_lft forever\n" +
			"5589: legionab12c    inet 10.201.0.1/32 scope global legionab12c\\       valid_lft forever preferred_lft forever\n"}).
		Once("iptables -t nat -C", sys.Answer{Code: 1, Stderr: "iptables: Bad rule (does a matching rule exist in that chain?).\n"}).
		On("iptables -t nat -S POSTROUTING", sys.Answer{Stdout: "-P POSTROUTING ACCEPT\n" +
			"-A POSTROUTING -s 10.200.7.0/24 ! -o legionab12c -m comment --comment legionab12c -j MASQUERADE\n" +
			"-A POSTROUTING -s 10.200.4.0/24 ! -o legionff000 -m comment --comment legionff000 -j MASQUERADE\n"})
	if _, err := NewNetNSNetwork(context.Background(), f, "ab12c", netip.MustParsePrefix("10.200.3.0/24"), netip.MustParseAddr("10.200.3.1"),
		&Endpoints{}, nil, quietLog()); err != nil {
		t.Fatal(err)
	}
	lines := f.Lines()
	for _, want := range []string{
		"ip addr add 10.200.3.1/24 dev legionab12c",
		"ip addr del 10.200.7.1/24 dev legionab12c",
		"iptables -t nat -D POSTROUTING -s 10.200.7.0/24 ! -o legionab12c -m comment --comment legionab12c -j MASQUERADE",
		"iptables -t nat -A POSTROUTING -s 10.200.3.0/24 ! -o legionab12c -m comment --comment legionab12c -j MASQUERADE",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no %q in %q", want, lines)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "10.201.0.1") || strings.Contains(l, "legionff000 -j") && strings.Contains(l, "-D") {
			t.Errorf("%q: a VIP or another node's rule touched", l)
		}
	}
}
