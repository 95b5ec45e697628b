package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/resolver"
	"github.com/legionbsd/legion/sys"
	"golang.org/x/sys/unix"
)

// What the lab's hosts print (netbsd's golden tests hold the same).
const (
	labBridgeNew = "legion0: flags=8802<BROADCAST,SIMPLEX,MULTICAST> metric 0 mtu 1500\n\tether 58:9c:fc:10:ff:b6\n\tnd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>\n"
	labRouteGet  = "   route to: default\ndestination: default\n       mask: default\n    gateway: 192.168.1.1\n        fib: 0\n  interface: vtnet0\n      flags: <UP,GATEWAY,DONE,STATIC>\n"
	labNoIface   = "ifconfig: interface %s does not exist\n"
)

// freshHost answers a FreeBSD host on which Legion has made nothing yet.
func freshHost() *sys.Fake {
	f := sys.NewFake()
	f.On("ifconfig legion0 ", sys.Answer{})
	f.Once("ifconfig legion0", sys.Answer{Code: 1, Stderr: strings.ReplaceAll(labNoIface, "%s", "legion0")})
	f.On("ifconfig legion0", sys.Answer{Stdout: labBridgeNew})
	f.On("ifconfig wg0 ", sys.Answer{})
	f.On("ifconfig wg0", sys.Answer{Code: 1, Stderr: strings.ReplaceAll(labNoIface, "%s", "wg0")})
	f.On("ifconfig bridge create", sys.Answer{Stdout: "legion0\n"}).
		On("wg genkey", sys.Answer{Stdout: "UFJJVjM=\n"}).
		On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
		On("wg show wg0 dump", sys.Answer{Stdout: "(none)\t(none)\t0\toff\n"}).
		On("ip6addrctl show", sys.Answer{Stdout: ""}).
		On("route -n get default", sys.Answer{Stdout: labRouteGet}).
		On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "1\n"}).
		On("ifconfig epair create", sys.Answer{Stdout: "epair4a\n"})
	return readyJailsHost(f) // pf enabled and calling legion/*: pods can be guarded
}

// labPFNetwork is node n1's network on subnet 4 of a fresh lab host.
func labPFNetwork(ctx context.Context, t *testing.T, zone string) (*PFNetwork, *sys.Fake) {
	t.Helper()
	f := freshHost()
	n, err := NewPFNetwork(ctx, PFNetworkConfig{Host: netbsd.Host{R: f, Log: quietLog()}, Node: netbsd.Node{Name: "n1", Subnet: 4},
		KeyPath: filepath.Join(t.TempDir(), "wireguard.key"), ExtIf: "vtnet0", ZoneFile: zone, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return n, f
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func podTask(uid, ns, svc string) *legion.Task {
	t := &legion.Task{}
	t.Metadata.UID, t.Metadata.Namespace, t.Metadata.Name = uid, ns, svc+"-1"
	t.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: svc}
	return t
}

func indexOf(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

func lastStdin(f *sys.Fake, line string) string {
	var in string
	for _, c := range f.Calls() {
		if c.String() == line {
			in = string(c.Stdin)
		}
	}
	return in
}

// A pod joins legion0 through its epair once its jail exists, is held
// until its guard is loaded with the first endpoints, is balanced to by
// pf's rdr for its service's VIP, and leaves host end first.
func TestPFNetworkPodLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zone := filepath.Join(t.TempDir(), "zone.json")
	n, f := labPFNetwork(ctx, t, zone)
	if n.Net.BridgeEther != "58:9c:fc:10:ff:b6" || n.Nameserver() != "10.200.4.1" {
		t.Fatalf("node network %+v, nameserver %s", n.Net, n.Nameserver())
	}
	for _, want := range []string{"kldload -n if_bridge", "ifconfig bridge create name legion0", "ifconfig legion0 inet 10.200.4.1/24"} {
		if indexOf(f.Lines(), want) < 0 {
			t.Errorf("node set-up did not run %q: %q", want, f.Lines())
		}
	}

	task := podTask("00000000-0000-4000-8000-000000000011", "shop", "web")
	ip, err := n.Attach(ctx, task)
	if err != nil || ip != "10.200.4.2" {
		t.Fatalf("Attach = %q, %v; want the subnet's first pod address", ip, err)
	}
	other := podTask("00000000-0000-4000-8000-000000000012", "shop", "web")
	other.Status.IP = "10.200.4.9" // recorded by an earlier agent
	if ip2, _ := n.Attach(ctx, other); ip2 != "10.200.4.9" {
		t.Fatalf("a task's recorded address must be kept, got %s", ip2)
	}
	if again, _ := n.Attach(ctx, task); again != ip {
		t.Fatalf("Attach again gave %s, want %s", again, ip)
	}

	f.Reset()
	f.On("ifconfig lp000000000011 ", sys.Answer{})
	f.On("ifconfig lp000000000011", sys.Answer{Code: 1, Stderr: strings.ReplaceAll(labNoIface, "%s", "lp000000000011")})
	joined := make(chan error, 1)
	go func() { joined <- n.Join(ctx, task, ip, true) }()
	poll(t, "the epair made", 10*time.Second, func() bool { return indexOf(f.Lines(), "route -j "+task.Metadata.UID+" add -inet6 default") >= 0 })
	select {
	case err := <-joined:
		t.Fatalf("Join returned (%v) before any policy was loaded: the pod would run unguarded", err)
	default:
	}
	if n.Guards.Guarded(netip.MustParseAddr(ip)) {
		t.Fatal("guarded before the endpoints arrived")
	}
	lines := f.Lines()
	for _, want := range []string{"ifconfig epair create", "ifconfig epair4a name lp000000000011", "ifconfig legion0 addm lp000000000011",
		"ifconfig epair4b vnet " + task.Metadata.UID, "ifconfig -j " + task.Metadata.UID + " epair4b inet 10.200.4.2/24",
		"route -j " + task.Metadata.UID + " add default 10.200.4.1"} {
		if indexOf(lines, want) < 0 {
			t.Errorf("join did not run %q: %q", want, lines)
		}
	}

	n.Apply(ctx, []*endpoints.Service{{Namespace: "shop", Name: "web", VIP: "10.201.0.1", Labels: map[string]string{"app": "web"},
		Ports: []endpoints.Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 8080}},
		Tasks: []*endpoints.Task{{Name: "web-1", IP: ip, Node: "n1", Slot: 1}}}}, nil)
	select {
	case err := <-joined:
		if err != nil {
			t.Fatalf("Join: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Join still held after the policy was loaded")
	}
	svc := lastStdin(f, "pfctl -a legion/svc -f -")
	if !strings.Contains(svc, "10.201.0.1") || !strings.Contains(svc, "port 8080") || !strings.Contains(svc, "10.200.4.2") {
		t.Errorf("legion/svc must redirect the VIP to the task's port:\n%s", svc)
	}
	pol := lastStdin(f, "pfctl -a legion/policy -f -")
	if !strings.Contains(pol, "lp000000000011") {
		t.Errorf("legion/policy must guard the pod's host end:\n%s", pol)
	}
	z, err := os.ReadFile(zone)
	if err != nil || !strings.Contains(string(z), "10.201.0.1") || strings.Contains(string(z), "127.") {
		t.Errorf("the zone must answer the real VIP: %s (%v)", z, err)
	}
	var zf resolver.Zone
	if err := json.Unmarshal(z, &zf); err != nil || len(zf.Records) == 0 {
		t.Errorf("zone records %v (%v)", zf.Records, err)
	}
	// A jails node is dual-stack (5.7): each A has its IPv6 twin beside it.
	if r := zf.Records["web.shop.legion."]; len(r.A) != 1 || len(r.AAAA) != 1 || r.AAAA[0] != addrplan.MustTwin(netip.MustParseAddr(r.A[0])).String() {
		t.Errorf("the VIP's record must carry its twin: %+v", r)
	}
	if r := zf.Records["tasks.web.shop.legion."]; len(r.AAAA) != 1 || r.AAAA[0] != addrplan.MustTwin(netip.MustParseAddr(ip)).String() {
		t.Errorf("the task's record must carry its twin: %+v", r)
	}

	f.Reset()
	if err := n.Detach(ctx, task); err != nil {
		t.Fatal(err)
	}
	lines = f.Lines()
	if len(lines) == 0 || lines[0] != "ifconfig lp000000000011 destroy" {
		t.Fatalf("leaving must destroy the host end first: %q", lines)
	}
	if pol := lastStdin(f, "pfctl -a legion/policy -f -"); strings.Contains(pol, "lp000000000011") {
		t.Errorf("the policy still guards a pod that left:\n%s", pol)
	}
	if n.Guards.Guarded(netip.MustParseAddr(ip)) {
		t.Error("a pod that left is still recorded as guarded")
	}
	if again, _ := n.Attach(ctx, podTask("00000000-0000-4000-8000-000000000013", "shop", "web")); again != ip {
		t.Errorf("a freed address is given again: got %s, want %s", again, ip)
	}
}

// After an agent restart a running pod's network is adopted as it is:
// no epair is made and nothing waits for the policy.
func TestPFNetworkAdoptsJoinedPod(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, f := labPFNetwork(ctx, t, "")
	task := podTask("00000000-0000-4000-8000-000000000011", "shop", "web")
	task.Status.IP = "10.200.4.7"
	f.Reset()
	f.On("ifconfig lp000000000011", sys.Answer{Stdout: "lp000000000011: flags=8863<UP> metric 0 mtu 1420\n\tether 58:9c:fc:10:ff:b6\n"})
	f.On("ifconfig -j "+task.Metadata.UID, sys.Answer{Stdout: "epair4b: flags=8863<UP> metric 0 mtu 1420\n\tinet 10.200.4.7 netmask 0xffffff00 broadcast 10.200.4.255\n\tinet6 fd00:10:200:4::7 prefixlen 64\n"})
	ip, err := n.Attach(ctx, task)
	if err != nil || ip != "10.200.4.7" {
		t.Fatalf("Attach = %s, %v", ip, err)
	}
	if err := n.Join(ctx, task, ip, false); err != nil {
		t.Fatal(err)
	}
	for _, l := range f.Lines() {
		if strings.Contains(l, "epair create") || strings.Contains(l, " inet ") || strings.HasPrefix(l, "pfctl") {
			t.Errorf("adopting ran %q: an adopted pod keeps its network, and pf keeps its anchors until the endpoints arrive", l)
		}
	}
}

// The jails platform opens the jail runtime on ZFS and the pf network,
// serving DNS on the bridge's gateway; the process one the loopback
// network on the configured port.
func TestOpenPlatform(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	f := freshHost()
	o := jailsOptions(t, dir, f)
	p, err := openPlatform(ctx, o, "/usr/local/bin/legion", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if err := p.openNetwork(ctx, o, networkConfig{subnet: 4, node: "n1", zone: filepath.Join(dir, "zone.json"), keyDir: filepath.Join(dir, "pki")}, quietLog()); err != nil {
		t.Fatal(err)
	}
	nw, ok := p.network.(*PFNetwork)
	if !ok {
		t.Fatalf("jails platform network is %T, want *PFNetwork", p.network)
	}
	if nw.ExtIf != "vtnet0" || p.dnsListen != "10.200.4.1:53" {
		t.Errorf("ext if %q (want the default route's, vtnet0), DNS at %q (want the gateway's port 53)", nw.ExtIf, p.dnsListen)
	}
	if _, ok := p.runtime.(*jail.Jails); !ok {
		t.Errorf("jails platform runtime is %T", p.runtime)
	}
	if indexOf(f.Lines(), "sysctl -n kern.racct.enable") < 0 || indexOf(f.Lines(), "kldload") < 0 {
		t.Errorf("the jail runtime's start-up did not run: %q", f.Lines())
	}
	if fi, err := os.Stat(filepath.Join(dir, "pki", "wireguard.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("WireGuard key: %v %v", fi, err)
	}
	f.Reset()
	f.On("umount -f /var/run/legion/tasks/gone", sys.Answer{Code: 1, Stderr: "umount: /var/run/legion/tasks/gone: not a file system root directory\n"})
	if err := p.taskDirs.MountTaskDir(ctx, "/var/run/legion/tasks/t1", 16<<20); err != nil {
		t.Fatal(err)
	}
	if err := p.taskDirs.UnmountTaskDir(ctx, "/var/run/legion/tasks/t1"); err != nil {
		t.Fatal(err)
	}
	if err := p.taskDirs.UnmountTaskDir(ctx, "/var/run/legion/tasks/gone"); err != nil {
		t.Errorf("nothing mounted must be success: %v", err)
	}
	if d := strings.Join(f.Lines(), "\n"); d != "mount -t tmpfs -o mode=0700,size=16777216 tmpfs /var/run/legion/tasks/t1\numount -f /var/run/legion/tasks/t1\numount -f /var/run/legion/tasks/gone" {
		t.Errorf("task directory commands:\n%s", d)
	}
	var _ agent.PodJoiner = nw
	var _ agent.PodResolver = nw

	q := Options{DataDir: filepath.Join(dir, "pdata"), RunDir: filepath.Join(dir, "prun"), Platform: PlatformProcess, DNSListen: "127.0.0.1:0"}
	if err := q.defaults(); err != nil {
		t.Fatal(err)
	}
	pp, err := openPlatform(ctx, q, "/usr/local/bin/legion", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer pp.close()
	// The loopback network follows the cluster's ranges: pods and the
	// resolver in the image of the node's /24, VIPs in the service range's.
	plan := addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}
	if err := pp.openNetwork(ctx, q, networkConfig{plan: plan, subnet: 4, zone: filepath.Join(dir, "pzone.json")}, quietLog()); err != nil {
		t.Fatal(err)
	}
	ln, ok := pp.network.(*LoopbackNetwork)
	if !ok || ln.Subnet.String() != "127.42.4.0/24" || (pp.dnsListen != "127.42.4.1:53" && pp.dnsListen != "127.42.4.1:0") || pp.vipOctet != 43 {
		t.Errorf("process platform network %v, DNS %q, VIP octet %d", ln.Subnet, pp.dnsListen, pp.vipOctet)
	}
	if pp.taskDirs != nil || p.taskDirs == nil || p.noLimits {
		t.Errorf("task dirs: process %v, jails %v; jails noLimits %v with kern.racct.enable=1", pp.taskDirs, p.taskDirs, p.noLimits)
	}
	if err := p.wireGuardKey(ctx, o, filepath.Join(dir, "pki")); err != nil {
		t.Fatal(err)
	}
	if st := nodeStatus("n1", p, Options{}); st.Platform.Linux || st.Platform.NoLimits || st.WireGuard == nil || st.WireGuard.PublicKey != "PUB3" {
		t.Errorf("a jails node with rctl reports %+v, WireGuard %+v", st.Platform, st.WireGuard)
	}
	// The managers refuse a jails node reporting no ZFS root (D7).
	if st := nodeStatus("n1", p, Options{}); st.Runtime != legion.NodeRuntimeJails || st.ZFSRoot != o.ZFSRoot {
		t.Errorf("a jails node reports runtime %q and ZFS root %q, want %q and %q", st.Runtime, st.ZFSRoot, legion.NodeRuntimeJails, o.ZFSRoot)
	}
	if st := nodeStatus("n1", pp, Options{}); st.Runtime != legion.NodeRuntimeProcess || st.ZFSRoot != "" || st.Ingress != nil {
		t.Errorf("a process node reports runtime %q, ZFS root %q and ingress %+v", st.Runtime, st.ZFSRoot, st.Ingress)
	}
	// Where it serves Routes, as it was told to.
	if st := nodeStatus("n1", pp, Options{IngressTLSListen: "0.0.0.0:443"}); st.Ingress == nil || *st.Ingress != (legion.NodeIngress{HTTPS: "0.0.0.0:443"}) {
		t.Errorf("a node serving HTTPS reports ingress %+v", st.Ingress)
	}
	if err := pp.wireGuardKey(ctx, q, filepath.Join(dir, "ppki")); err != nil || nodeStatus("n1", pp, Options{}).WireGuard != nil {
		t.Errorf("a process node has no mesh: %v", err)
	}
	if _, ok := pp.network.(agent.PodJoiner); ok {
		t.Error("the loopback network has nothing to join")
	}

	bad := Options{DataDir: filepath.Join(dir, "b"), Platform: "bhyve"}
	if _, err := OpenImages(bad, nil); err == nil || !strings.Contains(err.Error(), `platform "bhyve"`) {
		t.Errorf("an unknown platform must be refused by name, got %v", err)
	}
}

func TestSubnetOf(t *testing.T) {
	t.Parallel()
	if n, err := subnetOf(addrplan.Plan{}, "10.200.7.0/24"); err != nil || n != 7 {
		t.Errorf("subnetOf = %d, %v", n, err)
	}
	for _, bad := range []string{"", "10.201.7.0/24", "10.200.7.0/16", "junk"} {
		if _, err := subnetOf(addrplan.Plan{}, bad); err == nil {
			t.Errorf("subnetOf(%q) must fail", bad)
		}
	}
	// A cluster of other ranges: its pod range's /24s, not the default's.
	other := addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}
	if n, err := subnetOf(other, "10.42.7.0/24"); err != nil || n != 7 {
		t.Errorf("subnetOf in 10.42/16 = %d, %v", n, err)
	}
	if _, err := subnetOf(other, "10.200.7.0/24"); err == nil || !strings.Contains(err.Error(), "10.42.0.0/16") {
		t.Errorf("a /24 of the default range must be refused in a 10.42/16 cluster naming it, got %v", err)
	}
}

// The mesh follows the peers the managers send: every other node becomes
// a wg0 peer with its pod subnet and underlay address; this node is left
// out.
func TestPFNetworkAppliesPeers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, f := labPFNetwork(ctx, t, "")
	f.Reset()
	n.ApplyPeers(ctx, []endpoints.Peer{
		{Name: "n1", PodCIDR: "10.200.4.0/24", PublicKey: "PUB3", Endpoint: "192.0.2.4:51820"},
		{Name: "n2", PodCIDR: "10.200.5.0/24", PublicKey: "KEY2", Endpoint: "192.0.2.5:51820"},
		{Name: "broken", PodCIDR: "10.9.0.0/24", PublicKey: "KEY9"},
	})
	var set string
	for _, l := range f.Lines() {
		if strings.Contains(l, "PUB3") || strings.Contains(l, "KEY9") {
			t.Errorf("wg ran %q: this node and a peer without a pod subnet are no peers", l)
		}
		if strings.HasPrefix(l, "wg set wg0 peer KEY2") {
			set = l
		}
	}
	for _, want := range []string{"10.200.5.0/24", "100.64.5.1/32", "endpoint 192.0.2.5:51820", "persistent-keepalive 25"} {
		if !strings.Contains(set, want) {
			t.Errorf("peer n2 set with %q, want %q in it (all: %q)", set, want, f.Lines())
		}
	}
}

// The managers' policy state reaches pf: a namespace's isolation mode, its
// NetworkPolicies, and every running task of the cluster as a member of
// its namespace, a Job's on another node included.
func TestPFNetworkEnforcesThePolicyState(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, f := labPFNetwork(ctx, t, "")
	f.On("ifconfig lp000000000011 ", sys.Answer{})
	f.On("ifconfig lp000000000011", sys.Answer{Code: 1, Stderr: strings.ReplaceAll(labNoIface, "%s", "lp000000000011")})
	web := podTask("00000000-0000-4000-8000-000000000011", "shop", "web")
	ip, _ := n.Attach(ctx, web)
	if err := n.Join(ctx, web, ip, false); err != nil {
		t.Fatal(err)
	}
	services := []*endpoints.Service{{Namespace: "shop", Name: "web", VIP: "10.201.0.1", Labels: map[string]string{"app": "web"},
		Ports: []endpoints.Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080}}, Tasks: []*endpoints.Task{{Name: "web-1", IP: ip, Node: "n1"}}}}
	members := endpoints.MembersOf([]*endpoints.Member{
		{Namespace: "shop", Service: "web", Task: "web-1", IP: ip, Node: "n1"},
		{Namespace: "shop", Task: "report-1", IP: "10.200.5.9", Node: "n2"},
		{Namespace: "front", Service: "gw", Task: "gw-1", IP: "10.200.6.3", Node: "n3"},
	})
	fromFront := legion.NetworkPolicySpec{Services: map[string]string{"app": "web"},
		Ingress: []legion.IngressRule{{From: []legion.Peer{{Namespace: "front"}}, Ports: []legion.PolicyPort{{Protocol: legion.TCP, Port: 8080}}}}}

	f.Reset()
	n.Apply(ctx, services, &endpoints.Policies{Isolation: map[string]legion.Isolation{"shop": legion.IsolationLocked},
		Policies: []endpoints.Policy{{Namespace: "shop", Name: "from-front", Spec: fromFront}}, Members: members})
	pol := lastStdin(f, "pfctl -a legion/policy -f -")
	if strings.Contains(pol, "from <ns_shop> to 10.200.4.2") {
		t.Errorf("a locked namespace's own tasks must not be let in:\n%s", pol)
	}
	if !strings.Contains(pol, "tasks of namespace front") || !strings.Contains(pol, "to 10.200.4.2 port 8080") || !strings.Contains(pol, "10.200.6.3") {
		t.Errorf("the policy must let namespace front's tasks (10.200.6.3) in on port 8080:\n%s", pol)
	}

	f.Reset()
	n.Apply(ctx, services, &endpoints.Policies{Members: members})
	pol = lastStdin(f, "pfctl -a legion/policy -f -")
	if !strings.Contains(pol, "from <ns_shop> to 10.200.4.2") || !strings.Contains(pol, "10.200.5.9") || strings.Contains(pol, "port 8080") {
		t.Errorf("with the default isolation the namespace's tasks, a Job's on another node included, are let in and no policy is left:\n%s", pol)
	}

	// A set without policy state keeps the last one.
	f.Reset()
	n.Apply(ctx, services, nil)
	if pol := lastStdin(f, "pfctl -a legion/policy -f -"); pol != "" {
		t.Errorf("no policy state sent must not reload the policy:\n%s", pol)
	}
}

// A task leaving its service's endpoints while still running (not ready,
// stopping for its drain, its node suspect) is still among the members:
// pf takes it out of the table and keeps its connections, on every node;
// its states are killed once it is gone (5.4).
func TestPFNetworkNotReadyKeepsStates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, f := labPFNetwork(ctx, t, "")
	svc := func(tasks ...*endpoints.Task) []*endpoints.Service {
		return []*endpoints.Service{{Namespace: "shop", Name: "web", VIP: "10.201.0.1",
			Ports: []endpoints.Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 8080}}, Tasks: tasks}}
	}
	// As an agent holds them: the members beside the endpoint tasks, then
	// the endpoint tasks' own.
	apply := func(lone []*endpoints.Member, services []*endpoints.Service) {
		n.Apply(ctx, services, &endpoints.Policies{Members: endpoints.MembersOf(lone).WithServices(services)})
	}
	a := &endpoints.Task{Name: "web-1", IP: "10.200.2.7", Node: "n2", Slot: 1}
	b := &endpoints.Task{Name: "web-2", IP: "10.200.3.7", Node: "n3", Slot: 2}
	apply(nil, svc(a, b))
	f.On("pfctl -s states", sys.Answer{Stdout: "all tcp 10.200.2.7:8080 (10.201.0.1:80) <- 10.200.4.2:5555       ESTABLISHED:ESTABLISHED\n" +
		"all tcp 10.200.3.7:8080 (10.201.0.1:80) <- 10.200.4.3:5556       ESTABLISHED:ESTABLISHED\n"})
	states := func() []string {
		var out []string
		for _, l := range f.Lines() {
			if strings.HasPrefix(l, "pfctl -k") || strings.HasPrefix(l, "pfctl -s states") {
				out = append(out, l)
			}
		}
		return out
	}

	f.Reset()
	apply([]*endpoints.Member{{Namespace: "shop", Service: "web", Task: "web-1", IP: a.IP, Node: a.Node}}, svc(b))
	if got := states(); len(got) != 0 {
		t.Errorf("a running backend out of the table had its states touched: %q", got)
	}
	if indexOf(f.Lines(), "pfctl -a legion/svc -t svc_shop_web -T replace 10.200.3.7 fd00:10:200:3::7") < 0 {
		t.Errorf("web-1 must leave the table: %q", f.Lines())
	}

	f.Reset()
	apply(nil, svc(b))
	want := []string{"pfctl -s states", "pfctl -k key -k tcp 10.201.0.1:80 <- 10.200.4.2:5555"}
	if d := cmp.Diff(want, states()); d != "" {
		t.Errorf("web-1 gone: its states must be killed, web-2's kept (-want +got):\n%s", d)
	}
}

// A pod network asked of a jails node is refused, not ignored: jails
// always have their VNET network.
func TestJailsRefuseAPodNetworkChoice(t *testing.T) {
	t.Parallel()
	o := jailsOptions(t, t.TempDir(), freshHost())
	o.PodNetwork = PodNetworkNetNS
	p, err := openPlatform(context.Background(), o, "/usr/local/bin/legion", quietLog())
	if err == nil {
		p.close()
		t.Fatal("a jails node took --pod-network netns")
	}
	if !strings.Contains(err.Error(), `pod network "netns"`) || !strings.Contains(err.Error(), "process platform") {
		t.Errorf("error %q does not name the setting and where it applies", err)
	}
}

// jailsOptions are a jails node's options on dir, its FreeBSD commands
// answered by f and its supervisors started by nothing, with the
// defaults filled in.
func jailsOptions(t *testing.T, dir string, f *sys.Fake) Options {
	t.Helper()
	o := Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run"), Platform: PlatformJails, Runner: f,
		launch: func(_, _ string, lock *os.File) (int, string) {
			// The supervisor would run for real, holding the run's start
			// lock while it lives: here to the end of the test.
			// Closed on exec: a process another test starts meanwhile
			// would otherwise hold the lock as long as it lives.
			fd, err := unix.FcntlInt(lock.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			held := os.NewFile(uintptr(fd), lock.Name())
			t.Cleanup(func() { held.Close() })
			return 0, ""
		}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	return o
}
