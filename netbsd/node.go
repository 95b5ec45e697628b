package netbsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/legionbsd/legion/sys"
)

// Modules the agent loads at start: after a reboot the bridge and epair
// modules are not loaded, and a jail cannot load them on demand.
func nodeModules() []string { return []string{"if_bridge", "if_epair", "if_wg", "pf"} }

// nodeSysctls are set at every start. pfil_member and pfil_local_phys are
// what network policy needs (5.3); forwarding routes pod traffic between
// legion0 and wg0 in both families.
func nodeSysctls() []string {
	return []string{
		"net.link.bridge.pfil_member=1",
		"net.link.bridge.pfil_local_phys=1",
		"net.inet.ip.forwarding=1",
		"net.inet6.ip6.forwarding=1",
	}
}

// AddrPolicy is one entry of an IPv6 address selection table.
type AddrPolicy struct {
	Prefix     string
	Precedence int
	Label      int
}

// ipv4PreferTable is FreeBSD's "ipv4_prefer" policy, given to pods when the
// host has no table of its own: a new VNET has none, and without one a pod
// tries an outside name's IPv6 address first and waits for it to time out.
func ipv4PreferTable() []AddrPolicy {
	return []AddrPolicy{
		{"::1/128", 50, 0},
		{"::/0", 40, 1},
		{"::ffff:0.0.0.0/96", 100, 4},
		{"2002::/16", 30, 2},
		{"2001::/32", 5, 5},
		{"fc00::/7", 3, 13},
		{"::/96", 1, 3},
		{"fec0::/10", 1, 11},
		{"3ffe::/16", 1, 12},
	}
}

// noAddrSelection is what `ip6addrctl show` prints (standard output, exit
// 0) on a host without a table.
const noAddrSelection = "no source-address-selection policy is installed"

// parseAddrSelection reads `ip6addrctl show`.
func parseAddrSelection(out string) ([]AddrPolicy, error) {
	var t []AddrPolicy
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "Prefix" {
			continue
		}
		if strings.TrimSpace(line) == noAddrSelection {
			return nil, nil
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("ip6addrctl output line %d: %q: expected \"prefix precedence label\"", i+1, line)
		}
		// The entry is given to ip6addrctl again in every pod: a prefix it
		// would refuse stops there, not here.
		if p, err := netip.ParsePrefix(f[0]); err != nil || !p.Addr().Is6() {
			return nil, fmt.Errorf("ip6addrctl output line %d: prefix %q: expected an IPv6 prefix of length 0..128", i+1, f[0])
		}
		prec, err1 := strconv.Atoi(f[1])
		label, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("ip6addrctl output line %d: %q: precedence and label must be numbers", i+1, line)
		}
		t = append(t, AddrPolicy{Prefix: f[0], Precedence: prec, Label: label})
	}
	return t, nil
}

// NodeConfig is what this node's network is set up from.
type NodeConfig struct {
	Plan    addrplan.Plan // the cluster's ranges; zero: addrplan.Default()
	Subnet  int           // n of the plan's n-th pod /24
	KeyPath string        // the WireGuard private key file
}

// NodeNet is the node's network as set up: what pods need from it.
type NodeNet struct {
	Plan          addrplan.Plan // the cluster's ranges, as NodeConfig gave them
	Subnet        int
	BridgeEther   string       // legion0's Ethernet address, given to every host end
	AddrSelection []AddrPolicy // copied into every pod
	PublicKey     string       // this node's WireGuard public key
}

// Host runs the node's and the pods' interface commands.
type Host struct {
	R   sys.Runner
	Log *slog.Logger
}

func (h Host) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// readIface runs `ifconfig [-j jail] name`; a missing interface is nil.
func (h Host) readIface(ctx context.Context, jail, name string) (*ifaceInfo, error) {
	args := []string{name}
	if jail != "" {
		args = []string{"-j", jail, name}
	}
	res, err := h.R.Run(ctx, sys.Command("ifconfig", args...))
	if sys.IsExit(err, "does not exist") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read interface %s: %w", name, err)
	}
	ifs, err := parseIfconfig(string(res.Stdout))
	if err != nil {
		return nil, fmt.Errorf("read interface %s: %w", name, err)
	}
	if len(ifs) != 1 {
		return nil, fmt.Errorf("read interface %s: ifconfig printed %d interfaces, expected 1", name, len(ifs))
	}
	return &ifs[0], nil
}

func (h Host) run(ctx context.Context, name string, args ...string) (sys.Result, error) {
	return h.R.Run(ctx, sys.Command(name, args...))
}

func (h Host) runAll(ctx context.Context, cmds [][]string) error {
	for _, c := range cmds {
		if _, err := h.run(ctx, "ifconfig", c...); err != nil {
			return err
		}
	}
	return nil
}

// SetUpNode loads the modules, sets the sysctls, and brings legion0, wg0
// and the mesh routes to what cfg says, changing only what is missing. It
// makes the WireGuard key on first start.
func (h Host) SetUpNode(ctx context.Context, cfg NodeConfig) (NodeNet, error) {
	if cfg.Subnet < 0 || cfg.Subnet >= addrplan.MaxSubnets {
		return NodeNet{}, fmt.Errorf("node config: subnet %d, expected 0..%d", cfg.Subnet, addrplan.MaxSubnets-1)
	}
	for _, m := range nodeModules() {
		if _, err := h.run(ctx, "kldload", "-n", m); err != nil {
			return NodeNet{}, fmt.Errorf("load kernel module %s: %w", m, err)
		}
	}
	for _, s := range nodeSysctls() {
		if _, err := h.run(ctx, "sysctl", s); err != nil {
			return NodeNet{}, fmt.Errorf("set %s: %w", s, err)
		}
	}
	n, plan := cfg.Subnet, cfg.Plan.OrDefault()
	gw, gw6 := netip.PrefixFrom(plan.Gateway(n), 24), netip.PrefixFrom(plan.MustTwin(plan.Gateway(n)), 64)
	bridge, err := h.readIface(ctx, "", Bridge)
	if err != nil {
		return NodeNet{}, err
	}
	if err := h.runAll(ctx, planIface(bridge, ifaceWant{
		Name: Bridge, Create: []string{"bridge", "create", "name", Bridge}, MTU: MTU,
		Addrs: []netip.Prefix{gw, gw6},
	})); err != nil {
		return NodeNet{}, fmt.Errorf("set up %s: %w", Bridge, err)
	}
	if bridge == nil || bridge.Ether == "" {
		if bridge, err = h.readIface(ctx, "", Bridge); err != nil {
			return NodeNet{}, err
		}
		if bridge == nil || bridge.Ether == "" {
			return NodeNet{}, fmt.Errorf("set up %s: no Ethernet address after creation", Bridge)
		}
	}

	pub, err := EnsureKey(ctx, h.R, cfg.KeyPath)
	if err != nil {
		return NodeNet{}, err
	}
	wg, err := h.readIface(ctx, "", WGIface)
	if err != nil {
		return NodeNet{}, err
	}
	u, u6 := netip.PrefixFrom(addrplan.UnderlayAddr(n), 16), netip.PrefixFrom(plan.MustTwin(addrplan.UnderlayAddr(n)), 96)
	if err := h.runAll(ctx, planIface(wg, ifaceWant{
		Name: WGIface, Create: []string{"wg", "create", "name", WGIface}, MTU: MTU,
		Addrs: []netip.Prefix{u, u6},
	})); err != nil {
		return NodeNet{}, fmt.Errorf("set up %s: %w", WGIface, err)
	}
	if err := h.ensureWGKey(ctx, cfg.KeyPath, pub); err != nil {
		return NodeNet{}, err
	}
	for _, r := range [][]string{
		{"-n", "add", "-net", plan.Pod.String(), "-interface", WGIface},
		{"-n", "add", "-inet6", "-net", plan.Pod6().String(), "-interface", WGIface},
	} {
		if err := h.ensureRoute(ctx, r); err != nil {
			return NodeNet{}, fmt.Errorf("route the pod range into %s: %w", WGIface, err)
		}
	}

	res, err := h.run(ctx, "ip6addrctl", "show")
	if err != nil {
		return NodeNet{}, fmt.Errorf("read the address selection table: %w", err)
	}
	table, err := parseAddrSelection(string(res.Stdout))
	if err != nil {
		return NodeNet{}, err
	}
	if len(table) == 0 {
		table = ipv4PreferTable()
	}
	return NodeNet{Plan: cfg.Plan, Subnet: n, BridgeEther: bridge.Ether, AddrSelection: table, PublicKey: pub}, nil
}

// ensureWGKey gives wg0 the node's key and port unless it has them already.
func (h Host) ensureWGKey(ctx context.Context, keyPath, pub string) error {
	res, err := h.run(ctx, "wg", "show", WGIface, "dump")
	if err != nil {
		return fmt.Errorf("read %s: %w", WGIface, err)
	}
	first, _, _ := strings.Cut(string(res.Stdout), "\n")
	f := strings.Split(first, "\t")
	if len(f) >= 3 && f[1] == pub && f[2] == strconv.Itoa(WGPort) {
		return nil
	}
	if _, err := h.run(ctx, "wg", "set", WGIface, "private-key", keyPath, "listen-port", strconv.Itoa(WGPort)); err != nil {
		return fmt.Errorf("set %s key: %w", WGIface, err)
	}
	return nil
}

// ensureRoute runs `route -n add ... -interface wg0`. The route survives a
// daemon restart, so it is often there: route(8) then prints its refusal
// on standard output, worded from the errno it got, and over netlink that
// wording is not to be relied on. A failed add is therefore settled by the
// table: the route there through wg0 is success, anything else fails.
func (h Host) ensureRoute(ctx context.Context, add []string) error {
	_, err := h.run(ctx, "route", add...)
	if err == nil || sys.IsExitOut(err, "already in table") {
		return nil
	}
	var ee *sys.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	get := []string{"-n", "get"}
	for i, a := range add {
		if a == "add" {
			// "-n add [-inet6] -net CIDR -interface wg0" without the gateway
			get = append(get, add[i+1:len(add)-2]...)
			break
		}
	}
	res, gerr := h.run(ctx, "route", get...)
	if gerr == nil && routeIface(string(res.Stdout)) == WGIface {
		return nil
	}
	return err
}

// routeIface is the interface `route -n get` names.
func routeIface(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "interface" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
