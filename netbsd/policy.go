package netbsd

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/netbsd/addrplan"
)

// PolicyState is what the legion/policy anchor is rendered from: this node,
// the namespaces' isolation modes (absent: namespace), every policy, the
// cluster's services and tasks (Job tasks included), and this node's pods.
type PolicyState struct {
	Node      Node
	Plan      addrplan.Plan // the cluster's ranges; zero: addrplan.Default()
	Isolation map[string]Isolation
	Policies  []Policy
	Services  []Service
	Endpoints []Endpoint
	Pods      []Pod
}

func (st *PolicyState) isolation(ns string) Isolation {
	if m, ok := st.Isolation[ns]; ok && m != "" {
		return m
	}
	return IsolationNamespace
}

// peerSet is a set of tasks named by namespace and service labels; each
// becomes one table.
type peerSet struct {
	ns     string
	labels map[string]string
}

func (p peerSet) key() string {
	if len(p.labels) == 0 {
		return p.ns
	}
	ks := make([]string, 0, len(p.labels))
	for k := range p.labels {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	b.WriteString(p.ns)
	for i, k := range ks {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + p.labels[k])
	}
	return b.String()
}

// table names the set's table: ns_<namespace> for a whole namespace,
// peer_<hash> for one narrowed by labels.
func (p peerSet) table() string {
	if len(p.labels) == 0 {
		return tableName("ns_", p.ns, "")
	}
	h := fnv.New32a()
	h.Write([]byte(p.key()))
	return fmt.Sprintf("peer_%08x", h.Sum32())
}

// endpoint of an allowance: what it lets in or out.
type endKind int

const (
	endAny       endKind = iota // anyone / anywhere
	endTable                    // a peer set's table
	endEveryTask                // every task: the pod range
	endCIDR                     // an IPv4 network (egress)
)

type allowance struct {
	kind  endKind
	set   peerSet
	cidr  netip.Prefix
	ports []PolicyPort
}

func (a allowance) render(plan addrplan.Plan, fam int) (string, bool) {
	switch a.kind {
	case endTable:
		return "<" + a.set.table() + ">", true
	case endEveryTask:
		if fam == 0 {
			return plan.OrDefault().Pod.String(), true
		}
		return plan.Pod6().String(), true
	case endCIDR:
		return a.cidr.String(), fam == 0 // pods reach the outside over IPv4 only
	}
	return "any", true
}

// portClauses renders a rule's ports as (proto clause, port clause) pairs;
// no ports is one pair of empty clauses (every port and protocol).
func portClauses(ports []PolicyPort) [][2]string {
	if len(ports) == 0 {
		return [][2]string{{"", ""}}
	}
	out := make([][2]string, 0, len(ports))
	for _, p := range ports {
		proto := "proto { tcp udp }"
		if p.Proto != "" {
			proto = "proto " + string(p.Proto)
		}
		port := ""
		if p.Port != 0 {
			port = "port " + strconv.Itoa(int(p.Port))
		}
		out = append(out, [2]string{proto, port})
	}
	return out
}

func portsAllow(ports []PolicyPort, proto Proto, port uint16) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if (p.Proto == "" || p.Proto == proto) && (p.Port == 0 || p.Port == port) {
			return true
		}
	}
	return false
}

// client is the identity of a pod as a source of traffic.
type client struct {
	ns, svc string
	labels  map[string]string
}

func (p Peer) matchesClient(policyNS string, c client) bool {
	if p.CIDR.IsValid() {
		return false
	}
	ns := p.Namespace
	if ns == "" {
		ns = policyNS
	}
	if ns != c.ns {
		return false
	}
	return len(p.ServiceLabels) == 0 || (c.svc != "" && labelsMatch(p.ServiceLabels, c.labels))
}

func (p Peer) matchesService(policyNS string, s Service) bool {
	if p.CIDR.IsValid() {
		return s.VIP.IsValid() && p.CIDR.Contains(s.VIP)
	}
	ns := p.Namespace
	if ns == "" {
		ns = policyNS
	}
	return ns == s.Namespace && labelsMatch(p.ServiceLabels, s.Labels)
}

func (p Peer) set(policyNS string) peerSet {
	ns := p.Namespace
	if ns == "" {
		ns = policyNS
	}
	return peerSet{ns: ns, labels: p.ServiceLabels}
}

// policyIndex holds what rendering asks for again and again.
type policyIndex struct {
	st        *PolicyState
	services  []Service            // with a VIP, sorted
	svcIso    []Isolation          // services[i]'s namespace's isolation
	svcPols   [][]*Policy          // the policies selecting services[i]
	svcTo     [][][2]string        // "VIP port N" of services[i]'s port j, per family
	selecting map[string][]*Policy // ns/service -> policies selecting it
}

func newPolicyIndex(st *PolicyState) *policyIndex {
	ix := &policyIndex{st: st, selecting: make(map[string][]*Policy)}
	for _, s := range st.Services {
		if s.VIP.IsValid() {
			ix.services = append(ix.services, s)
		}
	}
	sort.Slice(ix.services, func(i, j int) bool { return ix.services[i].Key() < ix.services[j].Key() })
	ix.svcIso = make([]Isolation, len(ix.services))
	ix.svcPols = make([][]*Policy, len(ix.services))
	ix.svcTo = make([][][2]string, len(ix.services))
	for i, s := range ix.services {
		ix.svcIso[i] = st.isolation(s.Namespace)
		ix.svcPols[i] = ix.policiesFor(s.Namespace, s.Name, s.Labels)
	}
	return ix
}

// policiesFor returns the policies selecting a service's tasks.
func (ix *policyIndex) policiesFor(ns, svc string, labels map[string]string) []*Policy {
	if svc == "" {
		return nil
	}
	k := ns + "/" + svc
	if ps, ok := ix.selecting[k]; ok {
		return ps
	}
	var ps []*Policy
	for i := range ix.st.Policies {
		p := &ix.st.Policies[i]
		if p.selects(ns, svc, labels) {
			ps = append(ps, p)
		}
	}
	ix.selecting[k] = ps
	return ps
}

// ingress lists who may connect to a pod of (ns, svc).
func (ix *policyIndex) ingress(ns, svc string, labels map[string]string) []allowance {
	var out []allowance
	switch ix.st.isolation(ns) {
	case IsolationOpen:
		out = append(out, allowance{kind: endAny})
	case IsolationNamespace:
		out = append(out, allowance{kind: endTable, set: peerSet{ns: ns}})
	}
	for _, p := range ix.policiesFor(ns, svc, labels) {
		for _, r := range p.Ingress {
			if len(r.Peers) == 0 {
				out = append(out, allowance{kind: endEveryTask, ports: r.Ports})
				continue
			}
			for _, peer := range r.Peers {
				if peer.CIDR.IsValid() {
					continue // networks are for egress only
				}
				out = append(out, allowance{kind: endTable, set: peer.set(p.Namespace), ports: r.Ports})
			}
		}
	}
	return out
}

// vipTo renders "VIP port N" of services[i]'s port j in both families,
// once per render.
func (ix *policyIndex) vipTo(i, j int) [2]string {
	if ix.svcTo[i] == nil {
		s := &ix.services[i]
		vip := both(ix.st.Plan, s.VIP)
		v4, v6 := vip[0].String(), vip[1].String()
		ix.svcTo[i] = make([][2]string, len(s.Ports))
		for k, p := range s.Ports {
			port := " port " + strconv.Itoa(int(p.Port))
			ix.svcTo[i][k] = [2]string{v4 + port, v6 + port}
		}
	}
	return ix.svcTo[i][j]
}

// ingressAllows reports whether services[i]'s tasks let client c in on a
// port.
func (ix *policyIndex) ingressAllows(i int, proto Proto, port uint16, c client) bool {
	switch ix.svcIso[i] {
	case IsolationOpen:
		return true
	case IsolationNamespace:
		if c.ns == ix.services[i].Namespace {
			return true
		}
	}
	for _, p := range ix.svcPols[i] {
		for _, r := range p.Ingress {
			if !portsAllow(r.Ports, proto, port) {
				continue
			}
			if len(r.Peers) == 0 {
				return true
			}
			for _, peer := range r.Peers {
				if peer.matchesClient(p.Namespace, c) {
					return true
				}
			}
		}
	}
	return false
}

// egress returns the egress rules limiting a pod (limited false: none).
func (ix *policyIndex) egress(c client) (limited bool, rules []PolicyRule, nsOf []string) {
	for _, p := range ix.policiesFor(c.ns, c.svc, c.labels) {
		if p.Egress == nil {
			continue
		}
		limited = true
		for _, r := range *p.Egress {
			rules = append(rules, r)
			nsOf = append(nsOf, p.Namespace)
		}
	}
	return limited, rules, nsOf
}

func egressAllowsService(rules []PolicyRule, nsOf []string, s Service, proto Proto, port uint16) bool {
	for i, r := range rules {
		if !portsAllow(r.Ports, proto, port) {
			continue
		}
		if len(r.Peers) == 0 {
			return true
		}
		for _, peer := range r.Peers {
			if peer.matchesService(nsOf[i], s) {
				return true
			}
		}
	}
	return false
}

type vipPort struct {
	svc  *Service
	port ServicePort
	to   [2]string // "VIP port N" in each family, rendered once
}

// RenderPolicy renders the legion/policy anchor: a guard on each local
// pod's host end (what it may send, which VIPs it may use, who may connect
// to it), the same checks for connections arriving from other nodes in on
// wg0, and a table per peer set. Membership changes touch only the tables.
func RenderPolicy(st PolicyState) (Anchor, error) {
	rules, sets, err := renderPolicyRules(&st)
	if err != nil {
		return Anchor{}, err
	}
	return Anchor{Path: AnchorPolicy, Rules: rules, Tables: policyTables(&st, sets)}, nil
}

// renderPolicyRules renders the rules, which do not depend on the
// endpoints, and the peer sets whose tables they use.
func renderPolicyRules(stp *PolicyState) (string, map[string]peerSet, error) {
	st := *stp
	n := st.Node.Subnet
	if n < 0 || n >= addrplan.MaxSubnets {
		return "", nil, fmt.Errorf("policy state: node %s subnet %d, expected 0..%d", st.Node.Name, n, addrplan.MaxSubnets-1)
	}
	for _, p := range st.Policies {
		if p.Egress == nil {
			continue
		}
		for _, r := range *p.Egress {
			for _, peer := range r.Peers {
				if peer.CIDR.IsValid() && !peer.CIDR.Addr().Is4() {
					return "", nil, fmt.Errorf("policy %s/%s egress: cidr %s: only IPv4 networks are supported", p.Namespace, p.Name, peer.CIDR)
				}
			}
		}
	}
	plan := st.Plan.OrDefault()
	for _, s := range st.Services {
		// Its twin is derived from the plan: one outside has none.
		if s.VIP.IsValid() && !plan.Service.Contains(s.VIP) {
			return "", nil, fmt.Errorf("service %s: VIP %s is outside the service CIDR %s", s.Key(), s.VIP, plan.Service)
		}
	}
	ix := newPolicyIndex(&st)
	pods := make([]Pod, len(st.Pods))
	copy(pods, st.Pods)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Addr.Less(pods[j].Addr) })

	sub, sub6 := plan.NodeSubnet(n), plan.NodeSubnet6(n)
	gw := both(plan, plan.Gateway(n))
	sets := make(map[string]peerSet)
	var b, mesh strings.Builder
	b.Grow(1024 + len(pods)*(2048+len(ix.services)*200))
	fmt.Fprintf(&b, "# %s for node %s (%s): rendered by the Legion agent\n", AnchorPolicy, st.Node.Name, sub)
	// What pods start toward other nodes keeps a floating state on the
	// mesh, so the replies are not taken for new connections below.
	// The main ruleset reaches legion/* in name order: this quick pass ends
	// the evaluation before legion/svc's MSS clamp, so it clamps too.
	fmt.Fprintf(&b, "pass out quick on %s inet from %s to %s keep state (floating) scrub (max-mss %d)\n", WGIface, sub, plan.Pod, MTU-40)
	fmt.Fprintf(&b, "pass out quick on %s inet6 from %s to %s keep state (floating) scrub (max-mss %d)\n", WGIface, sub6, plan.Pod6(), MTU-60)

	vipCache := make(map[string][]vipPort)
	for _, pod := range pods {
		if !sub.Contains(pod.Addr) || pod.Addr == plan.Gateway(n) {
			return "", nil, fmt.Errorf("pod %s: address %s is not a pod address of node subnet %s", pod.TaskUID, pod.Addr, sub)
		}
		lp := pod.HostIf
		if lp == "" {
			var err error
			if lp, err = HostIfName(pod.TaskUID); err != nil {
				return "", nil, err
			}
		}
		addr := both(plan, pod.Addr)
		c := client{ns: pod.Namespace, svc: pod.Service, labels: pod.ServiceLabels}
		name := pod.Namespace + "/" + pod.Service
		if pod.Service == "" {
			name = pod.Namespace + " (job)"
		}
		fmt.Fprintf(&b, "# pod %s task %s at %s on %s\n", name, pod.TaskUID, pod.Addr, lp)
		// IPv6 does over ICMPv6 what ARP does below pf.
		fmt.Fprintf(&b, "pass quick on %s inet6 proto icmp6 icmp6-type { neighbrsol neighbradv } no state\n", lp)
		for f := range 2 {
			fmt.Fprintf(&b, "block drop in quick on %s %s from ! %s to any\n", lp, family(f), addr[f])
		}

		// VIPs are checked here, at the client, still addressed to the
		// VIP: past the rdr the hairpin NAT has hidden the source.
		limited, egRules, egNS := ix.egress(c)
		ck := c.ns + "/" + c.svc
		vips, ok := vipCache[ck]
		if !ok {
			for i := range ix.services {
				s := &ix.services[i]
				for j, p := range s.Ports {
					if !ix.ingressAllows(i, p.Proto, p.TargetPort, c) {
						continue
					}
					if limited && !egressAllowsService(egRules, egNS, *s, p.Proto, p.TargetPort) {
						continue
					}
					vips = append(vips, vipPort{svc: s, port: p, to: ix.vipTo(i, j)})
				}
			}
			vipCache[ck] = vips
		}
		heads := [2]string{"pass in quick on " + lp + " inet proto ", "pass in quick on " + lp + " inet6 proto "}
		froms := [2]string{" from " + addr[0].String() + " to ", " from " + addr[1].String() + " to "}
		for _, v := range vips {
			for f := range 2 {
				b.WriteString(heads[f])
				b.WriteString(string(v.port.Proto))
				b.WriteString(froms[f])
				b.WriteString(v.to[f])
				b.WriteString(" keep state (if-bound)\n")
			}
		}
		fmt.Fprintf(&b, "block drop in quick on %s inet to %s\n", lp, plan.Service)
		fmt.Fprintf(&b, "block drop in quick on %s inet6 to %s\n", lp, plan.Service6())

		// What the pod starts is kept as if-bound state, so its replies
		// pass its own guard without matching again on the bridge.
		if !limited {
			for f := range 2 {
				fmt.Fprintf(&b, "pass in quick on %s %s from %s to any keep state (if-bound)\n", lp, family(f), addr[f])
			}
		} else {
			for f := range 2 {
				fmt.Fprintf(&b, "pass in quick on %s %s proto { tcp udp } from %s to %s port 53 keep state (if-bound)\n", lp, family(f), addr[f], gw[f])
			}
			for i, r := range egRules {
				var as []allowance
				if len(r.Peers) == 0 {
					as = append(as, allowance{kind: endAny, ports: r.Ports})
				}
				for _, peer := range r.Peers {
					if peer.CIDR.IsValid() {
						as = append(as, allowance{kind: endCIDR, cidr: peer.CIDR, ports: r.Ports})
					} else {
						as = append(as, allowance{kind: endTable, set: peer.set(egNS[i]), ports: r.Ports})
					}
				}
				for _, a := range as {
					if a.kind == endTable {
						sets[a.set.key()] = a.set
					}
					for _, pc := range portClauses(a.ports) {
						for f := range 2 {
							to, ok := a.render(plan, f)
							if !ok {
								continue
							}
							b.WriteString(words("pass in quick on", lp, family(f), pc[0], "from", addr[f].String(), "to", to, pc[1], "keep state (if-bound)"))
						}
					}
				}
			}
			fmt.Fprintf(&b, "block drop in quick on %s all\n", lp)
			// What the host sends the pod (probes, hairpin-NATed VIP
			// traffic, published ports) passes the host end unseen and
			// leaves no state there for the replies: keep one here.
			for f := range 2 {
				fmt.Fprintf(&b, "pass out quick on %s %s to %s keep state (floating)\n", Bridge, family(f), addr[f])
			}
		}

		// Who may connect: the nodes, what a VIP's or published port's
		// rdr translated here, and the allowed peer sets on their ports.
		fmt.Fprintf(&b, "pass out quick on %s inet from { %s %s } to %s\n", lp, gw[0], addrplan.UnderlayCIDR(), addr[0])
		fmt.Fprintf(&b, "pass out quick on %s inet6 from { %s %s } to %s\n", lp, gw[1], addrplan.UnderlayCIDR6(), addr[1])
		fmt.Fprintf(&b, "pass out quick on %s tagged %s\n", lp, ServiceTag)
		for _, a := range dedupe(ix.ingress(pod.Namespace, pod.Service, pod.ServiceLabels)) {
			if a.kind == endTable {
				sets[a.set.key()] = a.set
			}
			for _, pc := range portClauses(a.ports) {
				for f := range 2 {
					from, _ := a.render(plan, f)
					b.WriteString(words("pass out quick on", lp, family(f), pc[0], "from", from, "to", addr[f].String(), pc[1]))
					// Traffic from other nodes' tasks is routed in by the
					// host and never seen on the host end: check it where
					// it arrives.
					mesh.WriteString(words("pass in quick on", WGIface, family(f), pc[0], "from", from, "to", addr[f].String(), pc[1]))
				}
			}
		}
		fmt.Fprintf(&b, "block drop out quick on %s all\n", lp)
	}
	if mesh.Len() > 0 {
		fmt.Fprintf(&b, "# connections from other nodes' tasks\n")
		b.WriteString(mesh.String())
	}
	fmt.Fprintf(&b, "block drop in quick on %s inet from %s to %s\n", WGIface, plan.Pod, sub)
	fmt.Fprintf(&b, "block drop in quick on %s inet6 from %s to %s\n", WGIface, plan.Pod6(), sub6)

	// Name what each table holds, for whoever reads `pfctl -a legion/policy -s rules`.
	var legend strings.Builder
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := sets[k]
		fmt.Fprintf(&legend, "# table <%s>: tasks of namespace %s", s.table(), s.ns)
		if len(s.labels) > 0 {
			_, sel, _ := strings.Cut(k, "?")
			fmt.Fprintf(&legend, " with service labels %s", sel)
		}
		legend.WriteByte('\n')
	}
	rules := b.String()
	if legend.Len() > 0 {
		head, rest, _ := strings.Cut(rules, "\n")
		rules = head + "\n" + legend.String() + rest
	}
	return rules, sets, nil
}

// tables fills each peer set's table with its members' addresses, both
// families: every task of the cluster (ready or not, Jobs' included) and
// this node's pods, which may not be in the endpoints yet.
func policyTables(st *PolicyState, sets map[string]peerSet) []Table {
	if len(sets) == 0 {
		return nil
	}
	svcLabels := make(map[string]map[string]string, len(st.Services))
	for _, s := range st.Services {
		svcLabels[s.Key()] = s.Labels
	}
	byNS := make(map[string][]peerSet)
	for _, s := range sets {
		byNS[s.ns] = append(byNS[s.ns], s)
	}
	members := make(map[string][]netip.Addr, len(sets))
	pods := st.Plan.OrDefault().Pod
	add := func(ns, svc string, labels map[string]string, a netip.Addr) {
		if !pods.Contains(a) {
			return
		}
		for _, s := range byNS[ns] {
			if len(s.labels) == 0 || (svc != "" && labelsMatch(s.labels, labels)) {
				t := both(st.Plan, a)
				k := s.key()
				members[k] = append(members[k], t[0], t[1])
			}
		}
	}
	for _, e := range st.Endpoints {
		if _, ok := byNS[e.Namespace]; !ok {
			continue
		}
		add(e.Namespace, e.Service, svcLabels[e.Namespace+"/"+e.Service], e.Addr)
	}
	for _, p := range st.Pods {
		add(p.Namespace, p.Service, p.ServiceLabels, p.Addr)
	}
	tables := make([]Table, 0, len(sets))
	for k, s := range sets {
		tables = append(tables, Table{Name: s.table(), Addrs: sortAddrs(members[k])})
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	return tables
}

// dedupe drops allowances another one already states, as two policies may
// allow the same peers on the same ports.
func dedupe(as []allowance) []allowance {
	seen := make(map[string]bool, len(as))
	out := as[:0:0]
	for _, a := range as {
		k := fmt.Sprint(a.kind, a.set.key(), a.cidr, a.ports)
		if !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

// words joins the non-empty words with spaces and ends the line.
func words(ws ...string) string {
	var b strings.Builder
	for _, w := range ws {
		if w == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	b.WriteByte('\n')
	return b.String()
}
