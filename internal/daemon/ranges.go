package daemon

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/loopback"
)

// Ranges is what init on this host does with the ranges it was asked
// for (server.Config.Ranges): on the process platform it fills the
// missing ones with a pair no other cluster of this host uses, on jails
// with the defaults; either way the plan must overlap none of the host's
// networks. A pod range it chose stays claimed (loopback.Claim) until
// release, so two clusters made at the same moment never share it.
func Ranges(o Options) (choose func(addrplan.Plan) (addrplan.Plan, error), release func()) {
	o.platformDefaults()
	var (
		mu     sync.Mutex
		claims []io.Closer
	)
	release = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range claims {
			c.Close()
		}
		claims = nil
	}
	choose = func(asked addrplan.Plan) (addrplan.Plan, error) {
		nets, err := hostNets(false)
		if err != nil {
			return addrplan.Plan{}, err
		}
		plan := asked
		if o.Platform == PlatformProcess {
			if plan, err = freePlan(asked, rand.IntN(126), func(c io.Closer) {
				mu.Lock()
				defer mu.Unlock()
				claims = append(claims, c)
			}); err != nil {
				return addrplan.Plan{}, err
			}
		} else {
			if !plan.Pod.IsValid() {
				plan.Pod = addrplan.Default().Pod
			}
			if !plan.Service.IsValid() {
				plan.Service = addrplan.Default().Service
			}
		}
		if err := plan.Validate(); err != nil {
			return addrplan.Plan{}, err
		}
		return plan, plan.CheckRanges(map[string][]netip.Prefix{"this host": nets["this host"]})
	}
	return choose, release
}

// freePlan completes asked with ranges no other cluster of this host
// uses, claiming the pod range it chose (keep holds the claim); a range
// another cluster claimed meanwhile is passed over. start is where the
// search begins (random, so clusters made at once rarely race at all).
func freePlan(asked addrplan.Plan, start int, keep func(io.Closer)) (addrplan.Plan, error) {
	used, err := loopback.UsedOctets(loopback.ProcNet)
	if err != nil {
		return addrplan.Plan{}, err
	}
	// Other clusters' bridges (pod namespaces) are avoided too.
	all, err := hostNets(true)
	if err != nil {
		return addrplan.Plan{}, err
	}
	for {
		plan, err := loopback.FreePlan(asked, used, all["this host"], start)
		if err != nil || asked.Pod.IsValid() {
			return plan, err
		}
		c, err := loopback.Claim(plan.Pod)
		if loopback.AlreadyClaimed(err) {
			used[loopback.Image(plan.Pod).Addr().As4()[1]] = true
			continue
		}
		if err != nil {
			return addrplan.Plan{}, err
		}
		if c != nil {
			keep(c)
		}
		return plan, nil
	}
}

// hostNets are the networks of this host's interfaces, loopback left
// out, and Legion's own bridges too unless withBridges: they hold
// clusters' ranges (maybe this very node's, from before), which a new
// cluster avoids but is not refused for.
func hostNets(withBridges bool) (map[string][]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing this host's networks: %w", err)
	}
	var out []netip.Prefix
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || !withBridges && strings.HasPrefix(i.Name, "legion") {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
				out = append(out, p.Masked())
			}
		}
	}
	return map[string][]netip.Prefix{"this host": out}, nil
}

// nodePlan is the cluster's plan as registration told it (the node's
// pod /24 and the service range) and the node's subnet index.
func nodePlan(podCIDR, serviceCIDR string) (addrplan.Plan, int, error) {
	plan := addrplan.Default()
	n := 1 // a manager from before subnets gives none
	if podCIDR != "" {
		p, err := netip.ParsePrefix(podCIDR)
		if err != nil || !p.Addr().Is4() || p.Bits() != 24 {
			return addrplan.Plan{}, 0, fmt.Errorf("pod subnet %q: expected an IPv4 /24", podCIDR)
		}
		plan.Pod, n = netip.PrefixFrom(p.Addr(), 16).Masked(), int(p.Addr().As4()[2])
	}
	if serviceCIDR != "" {
		s, err := addrplan.ParseRange("service CIDR", serviceCIDR)
		if err != nil {
			return addrplan.Plan{}, 0, err
		}
		plan.Service = s
	}
	return plan, n, plan.Validate()
}

// resolverAddr is where a process node's resolver answers: port 53 of
// its gateway when this process may bind it (or a resolver of its own
// already does), else a port chosen there.
func resolverAddr(gw netip.Addr) string {
	at53 := netip.AddrPortFrom(gw, 53).String()
	c, err := net.ListenPacket("udp", at53)
	if err == nil {
		c.Close()
		return at53
	}
	if errors.Is(err, syscall.EADDRINUSE) && answers(at53) {
		return at53
	}
	return netip.AddrPortFrom(gw, 0).String()
}

// NoResolver as Options.DNSListen starts no node resolver.
const NoResolver = "none"
