package netbsd

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion/netbsd/addrplan"
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
	Plan      addrplan.Plan // the cluster's ranges; zero: addrplan.Default()
	ExtIf     string
	Services  []Service
	Endpoints []Endpoint
}

// ServiceTable is the table of a service's ready endpoints, cluster-wide.
func ServiceTable(s Service) string { return tableName("svc_", s.Namespace, s.Name) }

// LocalTable is the table of a service's ready endpoints on this node, for
// publish: host.
func LocalTable(s Service) string { return tableName("svl_", s.Namespace, s.Name) }

// both returns an address and its twin in plan p.
func both(p addrplan.Plan, a netip.Addr) [2]netip.Addr { return [2]netip.Addr{a, p.MustTwin(a)} }

// RenderServices renders the legion/svc anchor: one table per service of
// its ready endpoints (both families), a round-robin rdr per VIP port
// tagged LSVC, published ports on the external interface (ingress: every
// task through the mesh; host: local tasks only), the hairpin NAT on
// legion0, the mesh NAT on wg0, and the MSS clamp on wg0. The rules depend
// only on the services, never on the endpoints.
func RenderServices(st ServiceState) (Anchor, error) {
	r, err := renderServiceRules(st)
	if err != nil {
		return Anchor{}, err
	}
	tables, err := r.fill(st)
	if err != nil {
		return Anchor{}, err
	}
	return Anchor{Path: AnchorServices, Rules: r.rules, Tables: tables}, nil
}

// tableUse is a table the service rules use: a service's ready endpoints,
// cluster-wide or on this node only.
type tableUse struct {
	name, key string
	local     bool
}

// serviceRules is the endpoint-independent half of the legion/svc anchor.
type serviceRules struct {
	rules string
	uses  []tableUse // sorted by name
}

func renderServiceRules(st ServiceState) (serviceRules, error) {
	n := st.Node.Subnet
	if n < 0 || n >= addrplan.MaxSubnets {
		return serviceRules{}, fmt.Errorf("service state: node %s subnet %d, expected 0..%d", st.Node.Name, n, addrplan.MaxSubnets-1)
	}
	svcs := make([]Service, len(st.Services))
	copy(svcs, st.Services)
	sort.Slice(svcs, func(i, j int) bool {
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})

	var b strings.Builder
	b.Grow(256 + len(svcs)*512)
	plan := st.Plan.OrDefault()
	gw, sub, sub6 := plan.Gateway(n), plan.NodeSubnet(n), plan.NodeSubnet6(n)
	fmt.Fprintf(&b, "# %s for node %s (%s): rendered by the Legion agent\n", AnchorServices, st.Node.Name, sub)
	// Hairpin: a backend on the client's own bridge would answer it
	// directly, bypassing the host's states; NAT to the gateway brings the
	// reply back. The IPv6 twin names the address, as (legion0) would
	// include the link-local one.
	fmt.Fprintf(&b, "nat pass on %s inet from %s to %s tagged %s -> (%s)\n", Bridge, sub, sub, ServiceTag, Bridge)
	fmt.Fprintf(&b, "nat pass on %s inet6 from %s to %s tagged %s -> %s\n", Bridge, sub6, sub6, ServiceTag, plan.MustTwin(gw))
	// Mesh NAT: what reaches a remote backend from outside the pod range
	// (a published port) comes back through this node.
	fmt.Fprintf(&b, "nat pass on %s inet from ! %s to %s -> (%s)\n", WGIface, plan.Pod, plan.Pod, WGIface)
	fmt.Fprintf(&b, "nat pass on %s inet6 from ! %s to %s -> %s\n", WGIface, plan.Pod6(), plan.Pod6(), plan.MustTwin(addrplan.UnderlayAddr(n)))

	type published struct{ svc, port string }
	seen := make(map[string]published)
	uses := make([]tableUse, 0, len(svcs))
	cidr := plan.Service
	var rules strings.Builder
	for _, s := range svcs {
		usesAll, usesLocal := false, false
		rules.Reset()
		all := ServiceTable(s)
		for _, p := range s.Ports {
			if p.Proto != TCP && p.Proto != UDP {
				return serviceRules{}, fmt.Errorf("service %s port %q: protocol %q, expected tcp or udp", s.Key(), p.Name, p.Proto)
			}
			if p.Port == 0 || p.TargetPort == 0 {
				return serviceRules{}, fmt.Errorf("service %s port %q: port %d target %d, expected both set", s.Key(), p.Name, p.Port, p.TargetPort)
			}
			target := strconv.Itoa(int(p.TargetPort))
			if s.VIP.IsValid() {
				if !cidr.Contains(s.VIP) {
					return serviceRules{}, fmt.Errorf("service %s: VIP %s is outside the service CIDR %s", s.Key(), s.VIP, cidr)
				}
				usesAll = true
				port := strconv.Itoa(int(p.Port))
				for i, vip := range both(plan, s.VIP) {
					rules.WriteString(words("rdr pass on", Bridge, family(i), "proto", string(p.Proto), "to", vip.String(), "port", port,
						"tag", ServiceTag, "-> <"+all+"> port", target, "round-robin"))
				}
			}
			if p.Publish == PublishNone {
				continue
			}
			if p.PublishedPort == 0 {
				return serviceRules{}, fmt.Errorf("service %s port %q: published %s without a published port", s.Key(), p.Name, p.Publish)
			}
			if st.ExtIf == "" {
				return serviceRules{}, fmt.Errorf("service %s port %q: published, but the node has no external interface", s.Key(), p.Name)
			}
			k := string(p.Proto) + "/" + strconv.Itoa(int(p.PublishedPort))
			if other, dup := seen[k]; dup {
				return serviceRules{}, fmt.Errorf("published port %s: used by %s port %q and %s port %q", k, other.svc, other.port, s.Key(), p.Name)
			}
			seen[k] = published{s.Key(), p.Name}
			table := all
			switch p.Publish {
			case PublishIngress:
				usesAll = true
			case PublishHost:
				usesLocal, table = true, LocalTable(s)
			default:
				return serviceRules{}, fmt.Errorf("service %s port %q: publish %q, expected ingress or host", s.Key(), p.Name, p.Publish)
			}
			for i := range 2 {
				rules.WriteString(words("rdr pass on", st.ExtIf, family(i), "proto", string(p.Proto), "to", "("+st.ExtIf+")", "port", strconv.Itoa(int(p.PublishedPort)),
					"tag", ServiceTag, "-> <"+table+"> port", target, "round-robin"))
			}
		}
		if rules.Len() == 0 {
			continue
		}
		b.WriteString("# service " + s.Key() + "\n")
		b.WriteString(rules.String())
		if usesAll {
			uses = append(uses, tableUse{name: all, key: s.Key()})
		}
		if usesLocal {
			uses = append(uses, tableUse{name: LocalTable(s), key: s.Key(), local: true})
		}
	}
	// pf does not rely on path-MTU discovery over the mesh: clamp the MSS
	// of what leaves through wg0 to fit its MTU.
	fmt.Fprintf(&b, "match out on %s inet proto tcp all scrub (max-mss %d)\n", WGIface, MTU-40)
	fmt.Fprintf(&b, "match out on %s inet6 proto tcp all scrub (max-mss %d)\n", WGIface, MTU-60)
	sort.Slice(uses, func(i, j int) bool { return uses[i].name < uses[j].name })
	for i := 1; i < len(uses); i++ {
		if uses[i].name == uses[i-1].name {
			return serviceRules{}, fmt.Errorf("services share table name %s", uses[i].name)
		}
	}
	return serviceRules{rules: b.String(), uses: uses}, nil
}

// fill computes the tables' contents from the endpoints.
func (r serviceRules) fill(st ServiceState) ([]Table, error) {
	type members struct{ all, local []netip.Addr }
	byKey := make(map[string]*members, len(r.uses))
	for _, u := range r.uses {
		if byKey[u.key] == nil {
			byKey[u.key] = &members{}
		}
	}
	pods := st.Plan.OrDefault().Pod
	var key []byte
	for _, e := range st.Endpoints {
		if e.Service == "" || !e.InTable() {
			continue
		}
		key = append(append(append(key[:0], e.Namespace...), '/'), e.Service...)
		m := byKey[string(key)]
		if m == nil {
			continue
		}
		if !pods.Contains(e.Addr) {
			return nil, fmt.Errorf("endpoint %s of %s/%s: address %s is outside the pod CIDR %s", e.TaskUID, e.Namespace, e.Service, e.Addr, pods)
		}
		t := both(st.Plan, e.Addr)
		m.all = append(m.all, t[0], t[1])
		if e.Node == st.Node.Name {
			m.local = append(m.local, t[0], t[1])
		}
	}
	tables := make([]Table, len(r.uses))
	for i, u := range r.uses {
		m := byKey[u.key]
		if u.local {
			tables[i] = Table{Name: u.name, Addrs: sortAddrs(m.local)}
		} else {
			tables[i] = Table{Name: u.name, Addrs: sortAddrs(m.all)}
		}
	}
	return tables, nil
}

// sameServices reports whether two states render the same service rules,
// so an endpoint change can skip rendering them.
func sameServices(a, b *ServiceState) bool {
	if a.Node != b.Node || a.Plan != b.Plan || a.ExtIf != b.ExtIf || len(a.Services) != len(b.Services) {
		return false
	}
	for i := range a.Services {
		x, y := &a.Services[i], &b.Services[i]
		if x.Namespace != y.Namespace || x.Name != y.Name || x.VIP != y.VIP || !slices.Equal(x.Ports, y.Ports) {
			return false
		}
	}
	return true
}

func family(i int) string {
	if i == 0 {
		return "inet"
	}
	return "inet6"
}
