package lab

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrNoNetem says the kernel or tc here cannot add delay and loss.
var ErrNoNetem = errors.New("tc netem is not available here (no tc, or no sch_netem in the kernel)")

var (
	prefixMu sync.Mutex
	taken    = map[netip.Prefix]bool{} // this process's labs
)

// pickPrefix chooses a random 10.x.y.0/24 that no interface or route of
// the host overlaps, nor another lab of this process: a fixed range
// could be one a user's network already holds.
func pickPrefix() (netip.Prefix, error) {
	used, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	prefixMu.Lock()
	defer prefixMu.Unlock()
	for range 200 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rand.IntN(256)), byte(rand.IntN(256)), 0}), 24)
		if taken[p] {
			continue
		}
		clash := false
		for _, u := range used {
			if u.Overlaps(p) && u.Bits() > 0 {
				clash = true
				break
			}
		}
		if !clash {
			taken[p] = true
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free 10.x.y.0/24 for the lab network in 200 tries")
}

// hostPrefixes are the host's interface networks and routes.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Masked())
		}
	}
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	for _, line := range strings.Split(string(routes), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" || dst == "blackhole" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// ipcmd runs ip (or tc) with args and says what failed.
func ipcmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeBridge makes the lab bridge on the host, with the lab network's
// first address so tests on the host reach the nodes.
func (l *Lab) makeBridge() error {
	l.addCleanup(func() { exec.Command("ip", "link", "del", l.Bridge).Run() })
	if err := ipcmd("ip", "link", "add", "name", l.Bridge, "type", "bridge"); err != nil {
		return err
	}
	host := netip.PrefixFrom(l.prefix.Addr().Next(), l.prefix.Bits())
	if err := ipcmd("ip", "addr", "add", host.String(), "dev", l.Bridge); err != nil {
		return err
	}
	return ipcmd("ip", "link", "set", l.Bridge, "up")
}

// addNode makes n's namespace, its link to the bridge and its data
// directory, and loads the lab's images into it.
func (l *Lab) addNode(n *Node, i int) error {
	addr := l.prefix.Addr().Next()
	for range i + 1 {
		addr = addr.Next()
	}
	n.Addr = addr
	n.NS = fmt.Sprintf("lab-%s-%s", l.id, n.Name)
	n.Veth = fmt.Sprintf("%s-%s", l.Bridge, n.Name)
	n.DataDir = filepath.Join(l.Dir, n.Name)
	n.RunDir = filepath.Join(l.Dir, n.Name+".run")
	n.LogFile = filepath.Join(l.Dir, n.Name+".log")
	l.Nodes = append(l.Nodes, n)
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return err
	}
	// Deleting the namespace deletes its end of the link, and with it
	// the host end.
	l.addCleanup(func() { exec.Command("ip", "netns", "del", n.NS).Run() })
	if err := ipcmd("ip", "netns", "add", n.NS); err != nil {
		return err
	}
	l.addCleanup(func() { exec.Command("ip", "link", "del", n.Veth).Run() })
	steps := [][]string{
		{"ip", "-n", n.NS, "link", "set", "lo", "up"},
		{"ip", "link", "add", "name", n.Veth, "type", "veth", "peer", "name", "eth0", "netns", n.NS},
		{"ip", "link", "set", n.Veth, "master", l.Bridge},
		{"ip", "link", "set", n.Veth, "up"},
		{"ip", "-n", n.NS, "addr", "add", netip.PrefixFrom(addr, l.prefix.Bits()).String(), "dev", "eth0"},
		{"ip", "-n", n.NS, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := ipcmd(s[0], s[1:]...); err != nil {
			return err
		}
	}
	for _, img := range l.opts.Images {
		if err := ipcmd(l.bin, "image", "load", img, "--data-dir", n.DataDir); err != nil {
			return err
		}
	}
	return nil
}

// Cut takes n's link down: nothing reaches n or leaves it, the test's
// host included, until Heal. Packets are dropped, not refused, as on a
// real partition.
func (l *Lab) Cut(n *Node) error {
	l.logf("cut %s", n.Name)
	return ipcmd("ip", "link", "set", n.Veth, "down")
}

// Heal brings n's link up again.
func (l *Lab) Heal(n *Node) error {
	l.logf("heal %s", n.Name)
	return ipcmd("ip", "link", "set", n.Veth, "up")
}

// Isolate cuts n off from the nodes named, both ways, and from nobody
// else (the test's host still reaches it). With iptables, each side drops
// what arrives from the other, so packets vanish and calls time out as on
// a real partition; without it, a blackhole route on each side makes new
// connections fail at once instead. Either way, a connection already open
// stops getting answers.
func (l *Lab) Isolate(n *Node, from ...*Node) error {
	for _, o := range from {
		l.logf("isolate %s from %s", n.Name, o.Name)
		for _, c := range isolation(n, o, "-A", "add") {
			if err := ipcmd(c[0], c[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Rejoin undoes Isolate between n and the nodes named.
func (l *Lab) Rejoin(n *Node, from ...*Node) error {
	var errs []error
	for _, o := range from {
		l.logf("rejoin %s with %s", n.Name, o.Name)
		for _, c := range isolation(n, o, "-D", "del") {
			errs = append(errs, ipcmd(c[0], c[1:]...))
		}
	}
	return errors.Join(errs...)
}

// isolation are the commands that add (-A, add) or remove (-D, del) the
// cut between a and b. Drops are on input only: a locally sent packet
// dropped on output fails its send at once, which a partition does not.
func isolation(a, b *Node, iptablesOp, routeOp string) [][]string {
	if _, err := exec.LookPath("iptables"); err == nil {
		return [][]string{
			{"ip", "netns", "exec", a.NS, "iptables", iptablesOp, "INPUT", "-s", b.Addr.String(), "-j", "DROP"},
			{"ip", "netns", "exec", b.NS, "iptables", iptablesOp, "INPUT", "-s", a.Addr.String(), "-j", "DROP"},
		}
	}
	return [][]string{
		{"ip", "-n", a.NS, "route", routeOp, "blackhole", b.Addr.String() + "/32"},
		{"ip", "-n", b.NS, "route", routeOp, "blackhole", a.Addr.String() + "/32"},
	}
}

// Netem delays and drops n's packets, both ways (each direction gets
// delay and loss percent), until ClearNetem. It returns ErrNoNetem where
// tc netem cannot run.
func (l *Lab) Netem(n *Node, delay time.Duration, loss float64) error {
	l.logf("netem %s: delay %v, loss %.0f%%", n.Name, delay, loss)
	args := []string{"netem", "delay", fmt.Sprintf("%dus", delay.Microseconds()), "loss", fmt.Sprintf("%g%%", loss)}
	if _, err := exec.LookPath("tc"); err != nil {
		return ErrNoNetem
	}
	for _, side := range [][]string{{"-n", n.NS, "qdisc", "replace", "dev", "eth0", "root"}, {"qdisc", "replace", "dev", n.Veth, "root"}} {
		out, err := exec.Command("tc", append(side, args...)...).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "unknown") || strings.Contains(string(out), "not found") {
				return fmt.Errorf("%w: %s", ErrNoNetem, strings.TrimSpace(string(out)))
			}
			return fmt.Errorf("tc %s: %v: %s", strings.Join(side, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ClearNetem removes what Netem added.
func (l *Lab) ClearNetem(n *Node) error {
	l.logf("clear netem %s", n.Name)
	return errors.Join(ipcmd("tc", "-n", n.NS, "qdisc", "del", "dev", "eth0", "root"),
		ipcmd("tc", "qdisc", "del", "dev", n.Veth, "root"))
}

// NetemAvailable says why Netem cannot work here, or nil: it tries a
// netem qdisc in a throwaway namespace.
func NetemAvailable() error {
	if _, err := exec.LookPath("tc"); err != nil {
		return ErrNoNetem
	}
	probe := "lab-netem-" + randomHex(4)
	if err := ipcmd("ip", "netns", "add", probe); err != nil {
		return err
	}
	defer exec.Command("ip", "netns", "del", probe).Run()
	out, err := exec.Command("tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNoNetem, strings.TrimSpace(string(out)))
	}
	return nil
}

// ErrNoLoss says iptables cannot drop packets at random here.
var ErrNoLoss = errors.New("iptables with the statistic match is not available here")

// lossRules are the iptables rules Loss adds in a node's namespace: a
// random share of what enters and leaves its link is dropped.
func lossRules(percent float64) [][]string {
	p := fmt.Sprintf("%g", percent/100)
	return [][]string{
		{"INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"},
		{"OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"},
	}
}

// Loss drops percent of n's packets each way, with iptables rather than
// netem, until ClearLoss: for kernels without sch_netem, which can then
// still lose packets but not delay them.
func (l *Lab) Loss(n *Node, percent float64) error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return ErrNoLoss
	}
	l.logf("loss %s: %.0f%% (iptables)", n.Name, percent)
	for _, r := range lossRules(percent) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", n.NS, "iptables", "-A"}, r...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", ErrNoLoss, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ClearLoss removes what Loss(n, percent) added.
func (l *Lab) ClearLoss(n *Node, percent float64) error {
	l.logf("clear loss %s", n.Name)
	var errs []error
	for _, r := range lossRules(percent) {
		errs = append(errs, ipcmd("ip", append([]string{"netns", "exec", n.NS, "iptables", "-D"}, r...)...))
	}
	return errors.Join(errs...)
}
