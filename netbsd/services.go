package netbsd

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SoftDrain is how long a ready Service task told to stop keeps running
// after leaving the endpoints, while every other node reloads its table.
const SoftDrain = 2 * time.Second

// DrainFor is how long to keep a stopping task running: SoftDrain for a
// Service task that was ready, nothing for a Job's task or one never ready.
func DrainFor(serviceTask, wasReady bool) time.Duration {
	if serviceTask && wasReady {
		return SoftDrain
	}
	return 0
}

// ServiceState is what the legion/svc anchor is rendered from: this node,
// its external interface, and the cluster's services and endpoints.
type ServiceState struct {
	Node      Node
	ExtIf     string
	Services  []Service
	Endpoints []Endpoint
}

// ServiceTable is the table of a service's ready endpoints, cluster-wide.
func ServiceTable(s Service) string { return tableName("svc_", s.Namespace, s.Name) }

// LocalTable is the table of a service's ready endpoints on this node, for
// publish: host.
func LocalTable(s Service) string { return tableName("svl_", s.Namespace, s.Name) }

// both returns an address and its twin.
func both(a netip.Addr) [2]netip.Addr { return [2]netip.Addr{a, MustTwin(a)} }

// RenderServices renders the legion/svc anchor: one table per service of
// its ready endpoints (both families), a round-robin rdr per VIP port
// tagged LSVC, published ports on the external interface (ingress: every
// task through the mesh; host: local tasks only), the hairpin NAT on
// legion0, the mesh NAT on wg0, and the MSS clamp on wg0. The rules depend
// only on the services, never on the endpoints.
func RenderServices(st ServiceState) (Anchor, error) {
	n := st.Node.Subnet
	if n < 0 || n >= MaxSubnets {
		return Anchor{}, fmt.Errorf("service state: node %s subnet %d, expected 0..%d", st.Node.Name, n, MaxSubnets-1)
	}
	svcs := make([]Service, len(st.Services))
	copy(svcs, st.Services)
	sort.Slice(svcs, func(i, j int) bool {
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})

	type members struct{ all, local []netip.Addr }
	byKey := make(map[string]*members, len(svcs))
	for i := range svcs {
		byKey[svcs[i].Key()] = &members{}
	}
	for _, e := range st.Endpoints {
		if e.Service == "" || !e.InTable() {
			continue
		}
		m := byKey[e.Namespace+"/"+e.Service]
		if m == nil {
			continue
		}
		if !PodCIDR().Contains(e.Addr) {
			return Anchor{}, fmt.Errorf("endpoint %s of %s/%s: address %s is outside the pod CIDR %s", e.TaskUID, e.Namespace, e.Service, e.Addr, PodCIDR())
		}
		t := both(e.Addr)
		m.all = append(m.all, t[0], t[1])
		if e.Node == st.Node.Name {
			m.local = append(m.local, t[0], t[1])
		}
	}

	var b strings.Builder
	b.Grow(256 + len(svcs)*512)
	gw, sub := Gateway(n), NodeSubnet(n)
	fmt.Fprintf(&b, "# %s for node %s (%s): rendered by the Legion agent\n", AnchorServices, st.Node.Name, sub)
	// Hairpin: a backend on the client's own bridge would answer it
	// directly, bypassing the host's states; NAT to the gateway brings the
	// reply back. The IPv6 twin names the address, as (legion0) would
	// include the link-local one.
	fmt.Fprintf(&b, "nat pass on %s inet from %s to %s tagged %s -> (%s)\n", Bridge, sub, sub, ServiceTag, Bridge)
	fmt.Fprintf(&b, "nat pass on %s inet6 from %s to %s tagged %s -> %s\n", Bridge, NodeSubnet6(n), NodeSubnet6(n), ServiceTag, MustTwin(gw))
	// Mesh NAT: what reaches a remote backend from outside the pod range
	// (a published port) comes back through this node.
	fmt.Fprintf(&b, "nat pass on %s inet from ! %s to %s -> (%s)\n", WGIface, PodCIDR(), PodCIDR(), WGIface)
	fmt.Fprintf(&b, "nat pass on %s inet6 from ! %s to %s -> %s\n", WGIface, PodCIDR6(), PodCIDR6(), MustTwin(UnderlayAddr(n)))

	type published struct{ svc, port string }
	seen := make(map[string]published)
	tables := make([]Table, 0, len(svcs))
	for _, s := range svcs {
		usesAll, usesLocal := false, false
		var rules strings.Builder
		for _, p := range s.Ports {
			if p.Proto != TCP && p.Proto != UDP {
				return Anchor{}, fmt.Errorf("service %s port %q: protocol %q, expected tcp or udp", s.Key(), p.Name, p.Proto)
			}
			if p.Port == 0 || p.TargetPort == 0 {
				return Anchor{}, fmt.Errorf("service %s port %q: port %d target %d, expected both set", s.Key(), p.Name, p.Port, p.TargetPort)
			}
			target := strconv.Itoa(int(p.TargetPort))
			if s.VIP.IsValid() {
				if !ServiceCIDR().Contains(s.VIP) {
					return Anchor{}, fmt.Errorf("service %s: VIP %s is outside the service CIDR %s", s.Key(), s.VIP, ServiceCIDR())
				}
				usesAll = true
				for i, vip := range both(s.VIP) {
					fmt.Fprintf(&rules, "rdr pass on %s %s proto %s to %s port %d tag %s -> <%s> port %s round-robin\n",
						Bridge, family(i), p.Proto, vip, p.Port, ServiceTag, ServiceTable(s), target)
				}
			}
			if p.Publish == PublishNone {
				continue
			}
			if p.PublishedPort == 0 {
				return Anchor{}, fmt.Errorf("service %s port %q: published %s without a published port", s.Key(), p.Name, p.Publish)
			}
			if st.ExtIf == "" {
				return Anchor{}, fmt.Errorf("service %s port %q: published, but the node has no external interface", s.Key(), p.Name)
			}
			k := string(p.Proto) + "/" + strconv.Itoa(int(p.PublishedPort))
			if other, dup := seen[k]; dup {
				return Anchor{}, fmt.Errorf("published port %s: used by %s port %q and %s port %q", k, other.svc, other.port, s.Key(), p.Name)
			}
			seen[k] = published{s.Key(), p.Name}
			table := ServiceTable(s)
			switch p.Publish {
			case PublishIngress:
				usesAll = true
			case PublishHost:
				usesLocal, table = true, LocalTable(s)
			default:
				return Anchor{}, fmt.Errorf("service %s port %q: publish %q, expected ingress or host", s.Key(), p.Name, p.Publish)
			}
			for i := range 2 {
				fmt.Fprintf(&rules, "rdr pass on %s %s proto %s to (%s) port %d tag %s -> <%s> port %s round-robin\n",
					st.ExtIf, family(i), p.Proto, st.ExtIf, p.PublishedPort, ServiceTag, table, target)
			}
		}
		if rules.Len() == 0 {
			continue
		}
		fmt.Fprintf(&b, "# service %s\n", s.Key())
		b.WriteString(rules.String())
		m := byKey[s.Key()]
		if usesAll {
			tables = append(tables, Table{Name: ServiceTable(s), Addrs: sortAddrs(m.all)})
		}
		if usesLocal {
			tables = append(tables, Table{Name: LocalTable(s), Addrs: sortAddrs(m.local)})
		}
	}
	// pf does not rely on path-MTU discovery over the mesh: clamp the MSS
	// of what leaves through wg0 to fit its MTU.
	fmt.Fprintf(&b, "match out on %s inet proto tcp all scrub (max-mss %d)\n", WGIface, MTU-40)
	fmt.Fprintf(&b, "match out on %s inet6 proto tcp all scrub (max-mss %d)\n", WGIface, MTU-60)
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	for i := 1; i < len(tables); i++ {
		if tables[i].Name == tables[i-1].Name {
			return Anchor{}, fmt.Errorf("services share table name %s", tables[i].Name)
		}
	}
	return Anchor{Path: AnchorServices, Rules: b.String(), Tables: tables}, nil
}

func family(i int) string {
	if i == 0 {
		return "inet"
	}
	return "inet6"
}
