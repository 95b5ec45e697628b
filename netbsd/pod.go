package netbsd

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// HostIfName is the name of a pod's epair host end: lp and the last 12 hex
// digits of the task uid, which finds it again after an agent restart.
func HostIfName(taskUID string) (string, error) {
	var hex []byte
	for i := 0; i < len(taskUID); i++ {
		c := taskUID[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			hex = append(hex, c)
		case c >= 'A' && c <= 'F':
			hex = append(hex, c+'a'-'A')
		case c == '-':
		default:
			return "", fmt.Errorf("task uid %q: %q is not a hex digit", taskUID, c)
		}
	}
	if len(hex) < 12 {
		return "", fmt.Errorf("task uid %q: %d hex digits, expected at least 12", taskUID, len(hex))
	}
	return "lp" + string(hex[len(hex)-12:]), nil
}

// planPodJoin is everything after `ifconfig epair create` answered with
// the new pair's a end: rename and attach the host end, move the b end into
// the infra jail and configure it from the host (the pod jail needs no
// binaries).
func planPodJoin(pod Pod, epairA string, node NodeNet) [][]string {
	b := strings.TrimSuffix(epairA, "a") + "b"
	host, j := pod.HostIf, pod.Jail
	mtu := strconv.Itoa(MTU)
	a4 := netip.PrefixFrom(pod.Addr, 24).String()
	plan := node.Plan
	a6 := netip.PrefixFrom(plan.MustTwin(pod.Addr), 64).String()
	gw, gw6 := plan.Gateway(node.Subnet).String(), plan.MustTwin(plan.Gateway(node.Subnet)).String()
	cmds := [][]string{
		{"ifconfig", epairA, "name", host},
		// The bridge's own Ethernet address: ARP answers then name one
		// address whichever interface they came from, so the pod's frames
		// for the host are taken in on legion0, where the VIP rdr is.
		{"ifconfig", host, "ether", node.BridgeEther},
		// Before it comes up: a host that gives new interfaces an IPv6
		// link-local would give the host end one, and FreeBSD 15's bridge
		// refuses members with addresses (net.link.bridge.member_ifaddrs).
		// The host end carries no traffic of its own, so IPv6 stays off.
		{"ifconfig", host, "inet6", "-auto_linklocal", "ifdisabled"},
		{"ifconfig", host, "mtu", mtu, "up"},
		{"ifconfig", Bridge, "addm", host},
		{"ifconfig", b, "vnet", j},
		{"ifconfig", "-j", j, "lo0", "inet", "127.0.0.1/8", "up"},
		{"ifconfig", "-j", j, b, "mtu", mtu, "up"},
		{"ifconfig", "-j", j, b, "inet", a4},
		// no_dad before the address: a tentative address fails a
		// container binding it at start.
		{"ifconfig", "-j", j, b, "inet6", "no_dad", "-ifdisabled"},
		{"ifconfig", "-j", j, b, "inet6", a6, "alias"},
		{"route", "-j", j, "add", "default", gw},
		{"route", "-j", j, "add", "-inet6", "default", gw6},
	}
	for _, p := range node.AddrSelection {
		cmds = append(cmds, []string{"ip6addrctl", "-j", j, "add", p.Prefix, strconv.Itoa(p.Precedence), strconv.Itoa(p.Label)})
	}
	return cmds
}

// planPodAdopt completes a pod found already joined after an agent restart
// (its v4 address on jailIf): only its missing IPv6 twin is added.
func planPodAdopt(pod Pod, jailIf *ifaceInfo, node NodeNet) [][]string {
	plan := node.Plan
	a6 := netip.PrefixFrom(plan.MustTwin(pod.Addr), 64)
	if jailIf.has(a6) {
		return nil
	}
	j := pod.Jail
	return [][]string{
		{"ifconfig", "-j", j, jailIf.Name, "inet6", "no_dad", "-ifdisabled"},
		{"ifconfig", "-j", j, jailIf.Name, "inet6", a6.String(), "alias"},
		{"route", "-j", j, "add", "-inet6", "default", plan.MustTwin(plan.Gateway(node.Subnet)).String()},
	}
}

// JoinPod gives a pod its interface on legion0. A pod whose host end
// already exists and whose jail holds its address is adopted unchanged
// (addresses are never set again); a half-made one is destroyed and made
// again.
func (h Host) JoinPod(ctx context.Context, pod Pod, node NodeNet) error {
	if sub := node.Plan.NodeSubnet(node.Subnet); !sub.Contains(pod.Addr) || pod.Addr == node.Plan.Gateway(node.Subnet) {
		return fmt.Errorf("pod %s: address %s is not a pod address of node subnet %s", pod.TaskUID, pod.Addr, sub)
	}
	if pod.Jail == "" {
		return fmt.Errorf("pod %s: no infra jail", pod.TaskUID)
	}
	name, err := HostIfName(pod.TaskUID)
	if err != nil {
		return err
	}
	if pod.HostIf != "" && pod.HostIf != name {
		return fmt.Errorf("pod %s: host end %q, expected %q", pod.TaskUID, pod.HostIf, name)
	}
	pod.HostIf = name
	host, err := h.readIface(ctx, "", name)
	if err != nil {
		return err
	}
	if host != nil {
		res, err := h.run(ctx, "ifconfig", "-j", pod.Jail)
		if err != nil {
			return fmt.Errorf("pod %s: read jail %s interfaces: %w", pod.TaskUID, pod.Jail, err)
		}
		ifs, err := parseIfconfig(string(res.Stdout))
		if err != nil {
			return fmt.Errorf("pod %s: jail %s: %w", pod.TaskUID, pod.Jail, err)
		}
		for i := range ifs {
			if ifs[i].has(netip.PrefixFrom(pod.Addr, 24)) {
				return h.runLines(ctx, planPodAdopt(pod, &ifs[i], node))
			}
		}
		h.log().Info("pod network half made, making it again", "pod", pod.TaskUID, "host_if", name)
		if err := h.LeavePod(ctx, pod.TaskUID); err != nil {
			return err
		}
	}
	res, err := h.run(ctx, "ifconfig", "epair", "create")
	if err != nil {
		return fmt.Errorf("pod %s: create epair: %w", pod.TaskUID, err)
	}
	a := strings.TrimSpace(string(res.Stdout))
	if !strings.HasPrefix(a, "epair") || !strings.HasSuffix(a, "a") {
		return fmt.Errorf("pod %s: ifconfig epair create printed %q, expected epairNa", pod.TaskUID, a)
	}
	if err := h.runLines(ctx, planPodJoin(pod, a, node)); err != nil {
		return fmt.Errorf("pod %s: %w", pod.TaskUID, err)
	}
	return nil
}

func (h Host) runLines(ctx context.Context, cmds [][]string) error {
	for _, c := range cmds {
		if _, err := h.run(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// LeavePod destroys a pod's epair by its host end, which removes the pair
// even while the other end is still in the jail. A host end already gone is
// success.
func (h Host) LeavePod(ctx context.Context, taskUID string) error {
	name, err := HostIfName(taskUID)
	if err != nil {
		return err
	}
	_, err = h.run(ctx, "ifconfig", name, "destroy")
	if err != nil && !sys.IsExit(err, "does not exist") {
		return fmt.Errorf("pod %s: destroy %s: %w", taskUID, name, err)
	}
	return nil
}
