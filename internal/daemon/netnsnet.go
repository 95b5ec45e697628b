package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

// The pod networks of the process platform (Options.PodNetwork).
const (
	// PodNetworkLoopback: pods share the host's network and take
	// addresses in 127/8 (LoopbackNetwork).
	PodNetworkLoopback = "loopback"
	// PodNetworkNetNS: each pod has a Linux network namespace of its own
	// on the node's bridge (NetNSNetwork); the node fails to start where
	// it cannot make one.
	PodNetworkNetNS = "netns"
	// PodNetworkAuto: netns where this host allows it (Linux, root,
	// ip(8), namespaces), else loopback, saying why.
	PodNetworkAuto = "auto"
)

// netnsDir is where ip(8) keeps named network namespaces (bind mounts of
// their nsfs files).
const netnsDir = "/run/netns"

// netnsTag is the short name of this node's pod network objects on the
// host, from its data directory: the netns, veth and bridge names carry
// it, so nodes sharing a host never touch each other's, and a restarted
// daemon finds its own.
func netnsTag(dataDir string) string {
	h := fnv.New32a()
	h.Write([]byte(dataDir))
	return fmt.Sprintf("%08x", h.Sum32())[:5]
}

// netnsNames derives the host names of a node's pod network objects.
type netnsNames struct{ tag string }

// bridge is the node's bridge, "legion" and the tag (11 characters; the
// kernel takes 15).
func (n netnsNames) bridge() string { return "legion" + n.tag }

// netns is the name of a pod's namespace under /run/netns.
func (n netnsNames) netns(uid string) string { return "legion-" + n.tag + "-" + uid }

// prefix starts every pod namespace name of this node.
func (n netnsNames) prefix() string { return "legion-" + n.tag + "-" }

// path is the file a container joins.
func (n netnsNames) path(uid string) string { return filepath.Join(netnsDir, n.netns(uid)) }

// hostEnd and podEnd name a pod's veth pair: l, v (host) or q (pod, before
// it is renamed eth0 inside), the tag and the uid's last 8 hex digits.
func (n netnsNames) hostEnd(uid string) string { return "lv" + n.tag + uidTail(uid) }
func (n netnsNames) podEnd(uid string) string  { return "lq" + n.tag + uidTail(uid) }

// uidTail is the last 8 hex digits of a task uid (dashes dropped).
func uidTail(uid string) string {
	s := strings.ReplaceAll(strings.ToLower(uid), "-", "")
	if len(s) > 8 {
		s = s[len(s)-8:]
	}
	return s
}

// validUID keeps what reaches ip(8) and file names to hex digits and
// dashes, as task uids are.
func validUID(uid string) error {
	if uid == "" {
		return errors.New("task uid: missing")
	}
	for _, c := range uid {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return fmt.Errorf("task uid %q: %q is not a hex digit", uid, c)
		}
	}
	return nil
}

// netnsUsable says why this host cannot give pods namespaces of their
// own, or "" when it can: it makes one and removes it again.
func netnsUsable(ctx context.Context, r sys.Runner, names netnsNames) string {
	if runtime.GOOS != "linux" {
		return "network namespaces are Linux's"
	}
	if os.Geteuid() != 0 {
		return fmt.Sprintf("making network namespaces needs root (running as uid %d)", os.Geteuid())
	}
	probe := names.prefix() + "probe"
	if _, err := sys.Run(ctx, r, "ip", "netns", "add", probe); err != nil {
		return fmt.Sprintf("ip netns add failed: %v", err)
	}
	if _, err := sys.Run(ctx, r, "ip", "netns", "del", probe); err != nil {
		return fmt.Sprintf("ip netns del failed: %v", err)
	}
	return ""
}

// netnsRuntime gives every member container of a pod its pod's network
// namespace: the runtime honours the path and knows nothing of pods'
// networks.
type netnsRuntime struct {
	nodeRuntime
	names netnsNames
}

// Create implements jail.Runtime.
func (r netnsRuntime) Create(ctx context.Context, spec jail.ContainerSpec) error {
	if spec.Pod != "" && spec.NetNS == "" {
		spec.NetNS = r.names.path(spec.Pod)
	}
	return r.nodeRuntime.Create(ctx, spec)
}

// NetNSNetwork gives each pod of a process node a network namespace of its
// own: a veth pair whose pod end, eth0, holds the pod's address from the
// node's /24 with a default route through the gateway, and whose host end
// is a port of the node's bridge, which holds the gateway (where the node
// resolver answers) and the VIPs the proxies serve. Containers join the
// namespace through netnsRuntime; ip(8) does the work through the system
// runner, as every other host primitive goes.
type NetNSNetwork struct {
	R       sys.Runner
	Log     *slog.Logger
	Subnet  netip.Prefix // the node's pod /24
	Gateway netip.Addr   // on the bridge
	names   netnsNames
	eps     *Endpoints
	pool    LoopbackNetwork // hands out addresses (nothing loopback in it)

	mu   sync.Mutex
	vips map[netip.Addr]bool // VIP addresses on the bridge
}

// NewNetNSNetwork makes (or finds) the node's bridge with the gateway on
// it, turns on IPv4 forwarding for pods to reach other nodes' pods, and
// removes what an earlier daemon left of pods no longer there: keep
// reports the uids of pods whose infra container is still there.
func NewNetNSNetwork(ctx context.Context, r sys.Runner, tag string, subnet netip.Prefix, gateway netip.Addr,
	eps *Endpoints, keep map[string]bool, log *slog.Logger) (*NetNSNetwork, error) {
	n := &NetNSNetwork{R: r, Log: log, Subnet: subnet, Gateway: gateway, names: netnsNames{tag}, eps: eps,
		pool: LoopbackNetwork{Subnet: subnet}, vips: map[netip.Addr]bool{}}
	br := n.names.bridge()
	if _, err := sys.Run(ctx, r, "ip", "link", "show", "dev", br); err != nil {
		if _, err := sys.Run(ctx, r, "ip", "link", "add", br, "type", "bridge"); err != nil {
			return nil, fmt.Errorf("pod network: bridge %s: %w", br, err)
		}
	}
	addrs, err := n.bridgeAddrs(ctx)
	if err != nil {
		return nil, err
	}
	gw := netip.PrefixFrom(gateway, subnet.Bits())
	// Set only when missing: replacing an address takes its routes away
	// for a moment.
	if !addrs[gw] {
		if _, err := sys.Run(ctx, r, "ip", "addr", "add", gw.String(), "dev", br); err != nil {
			return nil, fmt.Errorf("pod network: gateway %s on %s: %w", gw, br, err)
		}
	}
	for p := range addrs {
		switch {
		case p.Bits() == 32:
			n.vips[p.Addr()] = true // an earlier daemon's; Apply keeps or drops them
		case p != gw:
			// The gateway of a subnet this node held before (removed and
			// joined again, a restored cluster): its route would keep
			// that subnet here, away from the node that holds it now.
			if _, err := sys.Run(ctx, r, "ip", "addr", "del", p.String(), "dev", br); err != nil {
				return nil, fmt.Errorf("pod network: the former gateway %s on %s: %w", p, br, err)
			}
		}
	}
	if _, err := sys.Run(ctx, r, "ip", "link", "set", br, "up"); err != nil {
		return nil, fmt.Errorf("pod network: %s up: %w", br, err)
	}
	if err := enableForwarding(log); err != nil {
		log.Warn("pod network: IPv4 forwarding is off and could not be turned on: pods reach only this node", "err", err)
	}
	if err := n.masquerade(ctx, "-C"); err != nil {
		// Missing: a first start, or a new subnet, whose former rule goes.
		if err := n.unmasquerade(ctx); err != nil {
			log.Warn("pod network: a former NAT rule of this node's stays", "err", err)
		}
		if err := n.masquerade(ctx, "-A"); err != nil {
			log.Warn("pod network: no NAT for pods (iptables MASQUERADE): pods reach this host's networks only", "err", err)
		}
	}
	if err := n.adopt(ctx, keep); err != nil {
		return nil, err
	}
	return n, nil
}

// masquerade checks (-C), adds (-A) or deletes (-D) the NAT rule that lets
// pods reach past this host as a VNET jail's do: what leaves the pod
// subnet other than through the bridge takes the host's address. The
// comment names the node's bridge, so several nodes on a host keep theirs.
func (n *NetNSNetwork) masquerade(ctx context.Context, op string) error {
	br := n.names.bridge()
	_, err := sys.Run(ctx, n.R, "iptables", "-t", "nat", op, "POSTROUTING", "-s", n.Subnet.Masked().String(), "!", "-o", br,
		"-m", "comment", "--comment", br, "-j", "MASQUERADE")
	return err
}

// unmasquerade deletes every NAT rule that names this node's bridge,
// whatever subnet it was made for (a cleanup may not know it).
func (n *NetNSNetwork) unmasquerade(ctx context.Context) error {
	res, err := sys.Run(ctx, n.R, "iptables", "-t", "nat", "-S", "POSTROUTING")
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil // no iptables, no rule
		}
		return err
	}
	mark := "--comment " + n.names.bridge() + " "
	var errs []error
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || !strings.Contains(line+" ", mark) {
			continue
		}
		f[0] = "-D"
		if _, err := sys.Run(ctx, n.R, "iptables", append([]string{"-t", "nat"}, f...)...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// enableForwarding turns on the host's IPv4 forwarding, which pods need to
// reach beyond the bridge, and says so when it changes it.
func enableForwarding(log *slog.Logger) error {
	const knob = "/proc/sys/net/ipv4/ip_forward"
	cur, err := os.ReadFile(knob)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(cur)) == "1" {
		return nil
	}
	if err := os.WriteFile(knob, []byte("1\n"), 0o644); err != nil {
		return err
	}
	log.Info("pod network: turned on IPv4 forwarding (net.ipv4.ip_forward=1) so pods reach past the bridge")
	return nil
}

// bridgeAddrs lists the IPv4 addresses on the bridge.
func (n *NetNSNetwork) bridgeAddrs(ctx context.Context) (map[netip.Prefix]bool, error) {
	res, err := sys.Run(ctx, n.R, "ip", "-o", "-4", "addr", "show", "dev", n.names.bridge())
	if err != nil {
		return nil, fmt.Errorf("pod network: addresses of %s: %w", n.names.bridge(), err)
	}
	out := map[netip.Prefix]bool{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, err := netip.ParsePrefix(f[i+1]); err == nil {
					out[p] = true
				}
			}
		}
	}
	return out, nil
}

// adopt removes the namespaces and veths of this node's pods that keep
// does not name: what a daemon killed mid-way through a pod's start or
// removal left.
func (n *NetNSNetwork) adopt(ctx context.Context, keep map[string]bool) error {
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pod network: %w", err)
	}
	tails := map[string]bool{}
	for uid := range keep {
		tails[uidTail(uid)] = true
	}
	for _, e := range entries {
		uid, ok := strings.CutPrefix(e.Name(), n.names.prefix())
		if !ok {
			continue
		}
		if keep[uid] {
			// The pod keeps the address its namespace holds, whatever its
			// task's status says (an agent killed before reporting it).
			if a, ok := n.podAddr(ctx, uid); ok {
				n.pool.reserve(a, uid)
			}
			continue
		}
		n.Log.Info("pod network: removing the namespace of a pod that is gone", "netns", e.Name())
		if err := n.delNetNS(ctx, e.Name()); err != nil {
			n.Log.Warn("pod network: removing a namespace", "netns", e.Name(), "err", err)
		}
	}
	links, err := n.links(ctx)
	if err != nil {
		return err
	}
	for _, l := range links {
		tail, ok := strings.CutPrefix(l, "lv"+n.names.tag)
		if !ok || tails[tail] {
			continue
		}
		n.Log.Info("pod network: removing the veth of a pod that is gone", "link", l)
		if err := n.delLink(ctx, l); err != nil {
			n.Log.Warn("pod network: removing a veth", "link", l, "err", err)
		}
	}
	return nil
}

// podAddr is the address on eth0 in the pod's namespace.
func (n *NetNSNetwork) podAddr(ctx context.Context, uid string) (netip.Addr, bool) {
	res, err := sys.Run(ctx, n.R, "ip", "-n", n.names.netns(uid), "-o", "-4", "addr", "show", "dev", "eth0")
	if err != nil {
		return netip.Addr{}, false
	}
	f := strings.Fields(string(res.Stdout))
	for i := 0; i+1 < len(f); i++ {
		if p, err := netip.ParsePrefix(f[i+1]); f[i] == "inet" && err == nil && n.Subnet.Contains(p.Addr()) {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// links lists the host's interface names.
func (n *NetNSNetwork) links(ctx context.Context) ([]string, error) {
	res, err := sys.Run(ctx, n.R, "ip", "-o", "link", "show")
	if err != nil {
		return nil, fmt.Errorf("pod network: listing links: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		// "7: lvab12c0000002a@if6: <BROADCAST,...> ..."
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		out = append(out, name)
	}
	return out, nil
}

func (n *NetNSNetwork) delNetNS(ctx context.Context, name string) error {
	_, err := sys.Run(ctx, n.R, "ip", "netns", "del", name)
	if err != nil && (sys.IsExit(err, "No such file") || sys.IsExit(err, "No such")) {
		return nil
	}
	return err
}

func (n *NetNSNetwork) delLink(ctx context.Context, name string) error {
	_, err := sys.Run(ctx, n.R, "ip", "link", "del", name)
	if err != nil && sys.IsExit(err, "Cannot find device") {
		return nil
	}
	return err
}

// Attach gives a task the lowest free address of the node's /24, or the
// one its pod has (held since the network found its namespace at start).
func (n *NetNSNetwork) Attach(ctx context.Context, t *legion.Task) (string, error) {
	if a, ok := n.pool.holder(t.Metadata.UID); ok {
		return a.String(), nil
	}
	return n.pool.Attach(ctx, t)
}

// Join makes the pod's namespace and veth pair, or adopts them when an
// earlier agent made both. There is no policy to wait for here.
func (n *NetNSNetwork) Join(ctx context.Context, t *legion.Task, ip string, _ bool) error {
	uid := t.Metadata.UID
	if err := validUID(uid); err != nil {
		return err
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !n.Subnet.Contains(a) {
		return fmt.Errorf("pod %s: address %q: expected one of %s", uid, ip, n.Subnet)
	}
	ns, host, pod := n.names.netns(uid), n.names.hostEnd(uid), n.names.podEnd(uid)
	if n.joined(ctx, uid, a) {
		return nil
	}
	// Whatever half of it is there goes first: a daemon killed mid-way.
	n.delLink(ctx, host)
	n.delNetNS(ctx, ns)
	steps := []sys.Cmd{
		sys.Command("ip", "netns", "add", ns),
		sys.Command("ip", "link", "add", host, "type", "veth", "peer", "name", pod, "netns", ns),
		sys.Command("ip", "link", "set", host, "master", n.names.bridge(), "up"),
		{Name: "ip", Args: []string{"-n", ns, "-batch", "-"}, Stdin: []byte(
			"link set lo up\n" +
				"link set dev " + pod + " name eth0\n" +
				"addr add " + netip.PrefixFrom(a, n.Subnet.Bits()).String() + " dev eth0\n" +
				"link set eth0 up\n" +
				"route add default via " + n.Gateway.String() + "\n")},
	}
	for _, c := range steps {
		if _, err := n.R.Run(ctx, c); err != nil {
			n.delLink(context.WithoutCancel(ctx), host)
			n.delNetNS(context.WithoutCancel(ctx), ns)
			return fmt.Errorf("pod %s: network namespace: %w", uid, err)
		}
	}
	// The address is the lowest free one, so often the one a pod just
	// gone had: the host's neighbour entry for it still names that pod's
	// veth, and Linux sends no gratuitous ARP for a new address, so the
	// host (its probes, the proxies) would reach the new pod only once
	// the entry went stale, up to a minute later: liveness probes failed
	// and restarted it meanwhile.
	if _, err := sys.Run(ctx, n.R, "ip", "neigh", "flush", "to", a.String(), "dev", n.names.bridge()); err != nil {
		n.Log.Warn("the host may reach the pod late: its address's old neighbour entry stays", "pod", uid, "address", a, "err", err)
	}
	return nil
}

// joined reports whether the pod's namespace is there, whole: its host
// end on the bridge and its eth0 holding the address (a daemon killed
// mid-way leaves less).
func (n *NetNSNetwork) joined(ctx context.Context, uid string, a netip.Addr) bool {
	if _, err := os.Stat(n.names.path(uid)); err != nil {
		return false
	}
	res, err := sys.Run(ctx, n.R, "ip", "-o", "link", "show", "dev", n.names.hostEnd(uid))
	if err != nil || !strings.Contains(string(res.Stdout), " master "+n.names.bridge()+" ") {
		return false
	}
	have, ok := n.podAddr(ctx, uid)
	return ok && have == a
}

// Detach removes the pod's veth pair and namespace and frees its address.
func (n *NetNSNetwork) Detach(ctx context.Context, t *legion.Task) error {
	uid := t.Metadata.UID
	if err := validUID(uid); err != nil {
		return err
	}
	err := errors.Join(n.delLink(ctx, n.names.hostEnd(uid)), n.delNetNS(ctx, n.names.netns(uid)))
	n.pool.Detach(ctx, t)
	return err
}

// Nameserver is where pods reach the node resolver: the gateway.
func (n *NetNSNetwork) Nameserver() string { return n.Gateway.String() }

// Apply puts the services' VIPs on the bridge (routed to from pods by
// their default route), has the proxies serve them, and takes off the
// VIPs no service has any more.
func (n *NetNSNetwork) Apply(ctx context.Context, services []*endpoints.Service, pol *endpoints.Policies) {
	want := map[netip.Addr]bool{}
	for _, s := range services {
		if a, err := netip.ParseAddr(s.VIP); err == nil && a.Is4() && !s.DNSRR {
			want[a] = true
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	br := n.names.bridge()
	for a := range want {
		if n.vips[a] {
			continue
		}
		if _, err := sys.Run(ctx, n.R, "ip", "addr", "add", a.String()+"/32", "dev", br); err != nil && !sys.IsExit(err, "File exists") {
			n.Log.Warn("pod network: VIP not put on the bridge", "vip", a, "err", err)
			continue
		}
		n.vips[a] = true
	}
	n.eps.Apply(ctx, services, pol)
	for a := range n.vips {
		if want[a] {
			continue
		}
		if _, err := sys.Run(ctx, n.R, "ip", "addr", "del", a.String()+"/32", "dev", br); err != nil && !sys.IsExit(err, "Cannot assign") {
			n.Log.Warn("pod network: VIP not taken off the bridge", "vip", a, "err", err)
			continue
		}
		delete(n.vips, a)
	}
}

// Remove takes the node's pod network off the host: every namespace and
// veth of its pods, and the bridge (legion up's end, with its pods).
func (n *NetNSNetwork) Remove(ctx context.Context) error {
	err := n.adopt(ctx, nil)
	if derr := n.delLink(ctx, n.names.bridge()); derr != nil {
		err = errors.Join(err, derr)
	}
	if derr := n.unmasquerade(ctx); derr != nil {
		err = errors.Join(err, derr)
	}
	return err
}

// RemovePodNetwork takes what a process node on dataDir made of its pod
// network off this host: its pods' namespaces and veths, its bridge and
// its NAT rule. A node that stops keeps them for the next daemon to
// adopt; this is for whoever removes the node for good (tests, an
// operator's clean-up). Nothing to remove is no error.
func RemovePodNetwork(ctx context.Context, dataDir string) error {
	n := &NetNSNetwork{R: sys.Exec{}, Log: slog.New(slog.DiscardHandler), names: netnsNames{netnsTag(dataDir)}}
	return n.Remove(ctx)
}

// PodNetNSPrefix is how the names of the pod namespaces a process node on
// dataDir makes begin (under /run/netns), for checks that none is left.
func PodNetNSPrefix(dataDir string) string { return netnsNames{netnsTag(dataDir)}.prefix() }
