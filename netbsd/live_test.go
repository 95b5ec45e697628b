//go:build freebsd && live

package netbsd

// Live tests: run as root on a FreeBSD 15 host with `go test -tags live
// ./netbsd/`. Each node is a throwaway VNET jail with its own pf, bridge
// and WireGuard (as in the phase-0 lab); pods are VNET jails inside it.
// Nothing is changed in the host's own network stack beyond loading the
// kernel modules.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/legionbsd/legion/sys"
)

// jexecRunner runs a node's commands inside its jail; kernel modules are
// loaded on the host, as a jail cannot load them.
type jexecRunner struct {
	host sys.Runner
	jail string
}

func (j jexecRunner) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	if c.Name == "kldload" {
		return j.host.Run(ctx, c)
	}
	return j.host.Run(ctx, sys.Cmd{Name: "jexec", Args: append([]string{j.jail, c.Name}, c.Args...), Stdin: c.Stdin})
}

// recorder runs commands and remembers their lines.
type recorder struct {
	r     sys.Runner
	lines []string
}

func (c *recorder) Run(ctx context.Context, cmd sys.Cmd) (sys.Result, error) {
	c.lines = append(c.lines, cmd.String())
	return c.r.Run(ctx, cmd)
}

func mustRun(t *testing.T, ctx context.Context, r sys.Runner, name string, args ...string) string {
	t.Helper()
	res, err := r.Run(ctx, sys.Command(name, args...))
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(res.Stdout)
}

type labNode struct {
	node Node
	jail string
	r    sys.Runner
	host Host
	net  NodeNet
	pf   *PF
	ext  string
}

const labPF = "nat-anchor \"legion/*\"\nrdr-anchor \"legion/*\"\nanchor \"legion/*\"\npass all\n"

// newLabNode makes a VNET jail acting as node n, with pf calling Legion's
// anchors and ext (a host interface moved into the jail, or "") as its
// external interface at underlay.
func newLabNode(t *testing.T, ctx context.Context, name string, subnet int, ext string, underlay netip.Prefix) *labNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("live tests need root")
	}
	jail := "lgtest-" + name
	mustRun(t, ctx, sys.Exec{}, "jail", "-c", "name="+jail, "path=/", "vnet", "persist", "children.max=16", "allow.raw_sockets")
	t.Cleanup(func() { _, _ = sys.Run(context.Background(), sys.Exec{}, "jail", "-R", jail) })
	if ext != "" {
		mustRun(t, ctx, sys.Exec{}, "ifconfig", ext, "vnet", jail)
	}
	r := jexecRunner{host: sys.Exec{}, jail: jail}
	n := &labNode{node: Node{Name: name, Subnet: subnet}, jail: jail, r: r, host: Host{R: r}, ext: ext}
	conf := filepath.Join(t.TempDir(), "pf.conf")
	if err := os.WriteFile(conf, []byte(labPF), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, r, "pfctl", "-f", conf)
	if _, err := r.Run(ctx, sys.Command("pfctl", "-e")); err != nil && !sys.IsExit(err, "already enabled") {
		t.Fatalf("enable pf in %s: %v", jail, err)
	}
	if ext != "" {
		mustRun(t, ctx, r, "ifconfig", ext, "inet", underlay.String(), "up")
		n.node.Endpoint = netip.AddrPortFrom(underlay.Addr(), WGPort)
	}
	cfg := NodeConfig{Subnet: subnet, KeyPath: filepath.Join(t.TempDir(), "wireguard.key")}
	nn, err := n.host.SetUpNode(ctx, cfg)
	if err != nil {
		t.Fatalf("set up %s: %v", name, err)
	}
	n.net, n.node.PublicKey = nn, nn.PublicKey
	n.pf = &PF{R: r, Guards: NewGuards(SystemClock{})}
	// Setting up again (an agent restart) changes nothing: no address is
	// set twice (5.4), the key stays.
	rec := &recorder{r: r}
	again, err := Host{R: rec}.SetUpNode(ctx, cfg)
	if err != nil {
		t.Fatalf("set up %s again: %v", name, err)
	}
	if again.PublicKey != nn.PublicKey {
		t.Errorf("%s: key changed across a restart", name)
	}
	for _, l := range rec.lines {
		if strings.Contains(l, " inet ") || strings.Contains(l, " inet6 ") || strings.Contains(l, "private-key") {
			t.Errorf("%s: set up again ran %q", name, l)
		}
	}
	return n
}

// addPod makes a pod jail inside the node and joins it to legion0.
func (n *labNode) addPod(t *testing.T, ctx context.Context, uid, ns, service string, labels map[string]string, a string) Pod {
	t.Helper()
	lp, err := HostIfName(uid)
	if err != nil {
		t.Fatal(err)
	}
	jail := "p" + lp[2:]
	mustRun(t, ctx, n.r, "jail", "-c", "name="+jail, "path=/", "vnet", "persist")
	pod := Pod{TaskUID: uid, Namespace: ns, Service: service, ServiceLabels: labels, Jail: jail, HostIf: lp, Addr: netip.MustParseAddr(a)}
	if err := n.host.JoinPod(ctx, pod, n.net); err != nil {
		t.Fatalf("join %s: %v", uid, err)
	}
	t.Cleanup(func() {
		_ = n.host.LeavePod(context.Background(), uid)
		_, _ = n.r.Run(context.Background(), sys.Command("jail", "-r", jail))
	})
	return pod
}

// serve runs a TCP listener in a pod until the test ends.
func (n *labNode) serve(t *testing.T, pod Pod, port int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "jexec", n.jail, "jexec", pod.Jail, "nc", "-l", "-k", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
}

// reaches polls until pod connects to target:port or the deadline passes.
func (n *labNode) reaches(ctx context.Context, pod Pod, target string, port int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		_, err := n.host.R.Run(ctx, sys.Command("jexec", pod.Jail, "nc", "-z", "-w", "2", target, fmt.Sprint(port)))
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestLivePodReachesPodThroughVIPOnOneNode(t *testing.T) {
	ctx := context.Background()
	mustRun(t, ctx, sys.Exec{}, "kldload", "-n", "pf")
	n := newLabNode(t, ctx, "n1", 1, "", netip.Prefix{})
	client := n.addPod(t, ctx, "00000000000000000000000000001002", "shop", "cli", map[string]string{"app": "cli"}, "10.200.1.2")
	server := n.addPod(t, ctx, "00000000000000000000000000001003", "shop", "web", map[string]string{"app": "web"}, "10.200.1.3")
	stranger := n.addPod(t, ctx, "00000000000000000000000000001004", "other", "x", map[string]string{"app": "x"}, "10.200.1.4")
	n.serve(t, server, 8080)

	web := Service{Namespace: "shop", Name: "web", VIP: netip.MustParseAddr("10.201.0.5"), Labels: map[string]string{"app": "web"},
		Ports: []ServicePort{{Name: "http", Proto: TCP, Port: 80, TargetPort: 8080}}}
	eps := []Endpoint{{Namespace: "shop", Service: "web", TaskUID: server.TaskUID, Node: "n1", Addr: server.Addr, Ready: true}}
	if _, err := n.pf.ApplyServices(ctx, &ServiceState{Node: n.node, Services: []Service{web}, Endpoints: eps}); err != nil {
		t.Fatal(err)
	}
	pods := []Pod{client, server, stranger}
	all := append(eps,
		Endpoint{Namespace: "shop", Service: "cli", TaskUID: client.TaskUID, Node: "n1", Addr: client.Addr, Ready: true},
		Endpoint{Namespace: "other", Service: "x", TaskUID: stranger.TaskUID, Node: "n1", Addr: stranger.Addr, Ready: true})
	if _, err := n.pf.ApplyPolicy(ctx, &PolicyState{Node: n.node, Services: []Service{web}, Endpoints: all, Pods: pods}); err != nil {
		t.Fatal(err)
	}
	if err := n.pf.Guards.Wait(ctx, client.Addr); err != nil {
		t.Fatal(err)
	}
	if !n.reaches(ctx, client, "10.201.0.5", 80, 20*time.Second) {
		t.Error("client does not reach web through its VIP (hairpin NAT)")
	}
	if !n.reaches(ctx, client, "fd00:10:201::5", 80, 20*time.Second) {
		t.Error("client does not reach web through the VIP's IPv6 twin")
	}
	if n.reaches(ctx, stranger, "10.201.0.5", 80, 3*time.Second) {
		t.Error("a pod of another namespace reached web's VIP")
	}
	if n.reaches(ctx, stranger, server.Addr.String(), 8080, 3*time.Second) {
		t.Error("a pod of another namespace reached web directly")
	}
	// Not ready: the table empties and new connections fail.
	eps[0].Ready = false
	plan, err := n.pf.ApplyServices(ctx, &ServiceState{Node: n.node, Services: []Service{web}, Endpoints: eps})
	if err != nil || plan.RulesChanged {
		t.Fatalf("readiness change: %+v %v", plan, err)
	}
	if n.reaches(ctx, client, "10.201.0.5", 80, 3*time.Second) {
		t.Error("the VIP still balances to a task not ready")
	}
}

func TestLivePodReachesPodAcrossTwoNodesOverWireGuard(t *testing.T) {
	ctx := context.Background()
	mustRun(t, ctx, sys.Exec{}, "kldload", "-n", "pf")
	mustRun(t, ctx, sys.Exec{}, "kldload", "-n", "if_epair")
	a := strings.TrimSpace(mustRun(t, ctx, sys.Exec{}, "ifconfig", "epair", "create"))
	b := strings.TrimSuffix(a, "a") + "b"
	t.Cleanup(func() { _, _ = sys.Run(context.Background(), sys.Exec{}, "ifconfig", a, "destroy") })

	n1 := newLabNode(t, ctx, "n1", 1, a, netip.MustParsePrefix("192.0.2.1/24"))
	n2 := newLabNode(t, ctx, "n2", 2, b, netip.MustParsePrefix("192.0.2.2/24"))
	nodes := []Node{n1.node, n2.node}
	for _, n := range []*labNode{n1, n2} {
		m := &Mesh{R: n.r, Self: n.node.Name}
		if _, err := m.Converge(ctx, nodes); err != nil {
			t.Fatalf("mesh on %s: %v", n.node.Name, err)
		}
	}
	client := n1.addPod(t, ctx, "00000000000000000000000000002002", "shop", "cli", map[string]string{"app": "cli"}, "10.200.1.2")
	server := n2.addPod(t, ctx, "00000000000000000000000000002003", "shop", "web", map[string]string{"app": "web"}, "10.200.2.3")
	n2.serve(t, server, 8080)

	web := Service{Namespace: "shop", Name: "web", VIP: netip.MustParseAddr("10.201.0.5"), Labels: map[string]string{"app": "web"},
		Ports: []ServicePort{{Name: "http", Proto: TCP, Port: 80, TargetPort: 8080, Publish: PublishIngress, PublishedPort: 30080}}}
	eps := []Endpoint{
		{Namespace: "shop", Service: "web", TaskUID: server.TaskUID, Node: "n2", Addr: server.Addr, Ready: true},
		{Namespace: "shop", Service: "cli", TaskUID: client.TaskUID, Node: "n1", Addr: client.Addr, Ready: true},
	}
	for _, n := range []*labNode{n1, n2} {
		st := ServiceState{Node: n.node, ExtIf: n.ext, Services: []Service{web}, Endpoints: eps}
		if _, err := n.pf.ApplyServices(ctx, &st); err != nil {
			t.Fatal(err)
		}
		var local []Pod
		for _, p := range []Pod{client, server} {
			if addrplan.NodeSubnet(n.node.Subnet).Contains(p.Addr) {
				local = append(local, p)
			}
		}
		if _, err := n.pf.ApplyPolicy(ctx, &PolicyState{Node: n.node, Services: []Service{web}, Endpoints: eps, Pods: local}); err != nil {
			t.Fatal(err)
		}
	}
	if !n1.reaches(ctx, client, server.Addr.String(), 8080, 30*time.Second) {
		t.Error("pod on n1 does not reach the pod on n2 over wg0")
	}
	if !n1.reaches(ctx, client, addrplan.MustTwin(server.Addr).String(), 8080, 20*time.Second) {
		t.Error("pod on n1 does not reach the pod on n2 over IPv6")
	}
	if !n1.reaches(ctx, client, "10.201.0.5", 80, 20*time.Second) {
		t.Error("pod on n1 does not reach web on n2 through the VIP")
	}
	// The routing mesh: n1's published port reaches the task on n2; the
	// host of n1's jail is outside it, so ask from n2's underlay side.
	res, err := n2.r.Run(ctx, sys.Command("nc", "-z", "-w", "3", "192.0.2.1", "30080"))
	if err != nil {
		t.Errorf("published port on n1 does not reach the task on n2: %v %s", err, res.Stderr)
	}
}

// A daemon restart on a node whose wg0 and routes survived (defect 1 of
// issue 22): route(8) refuses the second add, and set-up must still
// succeed. The test also shows where this host's route(8) puts the
// refusal, which sys.RouteExists records (standard output, exit 1).
func TestLiveDaemonRestartWithRoutesPresent(t *testing.T) {
	ctx := context.Background()
	mustRun(t, ctx, sys.Exec{}, "kldload", "-n", "pf")
	n := newLabNode(t, ctx, "restart", 6, "", netip.Prefix{}) // sets up twice already
	got := mustRun(t, ctx, n.r, "route", "-n", "get", "-net", addrplan.PodCIDR().String())
	if routeIface(got) != WGIface {
		t.Fatalf("the pod range is not routed into %s:\n%s", WGIface, got)
	}
	_, err := n.r.Run(ctx, sys.Command("route", "-n", "add", "-net", addrplan.PodCIDR().String(), "-interface", WGIface))
	var ee *sys.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("adding the route again: want route(8) to refuse, got %v", err)
	}
	t.Logf("route(8) refusal: exit %d, stdout %q, stderr %q", ee.Code, ee.Stdout, ee.Stderr)
	if !strings.Contains(ee.Stdout, "already in table") {
		t.Errorf("route(8) did not print its refusal on standard output as recorded (sys.RouteExists): stdout %q stderr %q", ee.Stdout, ee.Stderr)
	}
	// The restarted daemon's set-up: a fresh Host, the same node.
	if _, err := (Host{R: n.r}).SetUpNode(ctx, NodeConfig{Subnet: 6, KeyPath: filepath.Join(t.TempDir(), "wireguard.key")}); err != nil {
		t.Fatalf("set up after a restart with the routes present: %v", err)
	}
	// A fresh VNET has no address selection policy: ip6addrctl says so on
	// standard output (sys.IP6AddrctlNone) and pods get the IPv4-preferring
	// table.
	out := mustRun(t, ctx, n.r, "ip6addrctl", "show")
	if tbl, err := parseAddrSelection(out); err != nil {
		t.Errorf("ip6addrctl show %q: %v", out, err)
	} else if len(tbl) == 0 && len(n.net.AddrSelection) == 0 {
		t.Error("a node without a policy must give pods the IPv4-preferring table")
	}
}
