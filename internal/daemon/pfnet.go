package daemon

import (
	"context"
	"fmt"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// PFNetwork is the FreeBSD pod network (5.3-5.6): each pod is a VNET jail
// joined to the node's legion0 bridge by an epair, services are balanced
// by pf's legion/svc anchor, and every local pod has a guard in
// legion/policy that must be loaded before anything in the pod runs.
// The cluster's names are served by the node resolver on the bridge's
// gateway address from the zone file it rewrites.
type PFNetwork struct {
	Host     netbsd.Host
	PF       *netbsd.PF
	Guards   *netbsd.Guards
	Node     netbsd.Node    // this node: name and pod subnet
	Plan     addrplan.Plan  // the cluster's ranges; zero: addrplan.Default()
	Net      netbsd.NodeNet // what SetUpNode made
	ExtIf    string         // where published ports are redirected from
	ZoneFile string
	Logger   *slog.Logger

	Mesh *netbsd.Mesh

	mu    sync.Mutex
	addrs map[string]netip.Addr // task uid -> pod address
	pods  map[string]netbsd.Pod // task uid -> joined pod
	// services is the last endpoints received; nil until the first, so
	// that pf keeps what an earlier agent loaded until then (5.4).
	services []*endpoints.Service
	// policies is the last policy state received; nil: none yet (every
	// namespace isolated by default, no NetworkPolicy).
	policies *endpoints.Policies
}

// PFNetworkConfig is what a node's pf network is set up from.
type PFNetworkConfig struct {
	Host     netbsd.Host
	Node     netbsd.Node
	Plan     addrplan.Plan // the cluster's ranges; zero: addrplan.Default()
	KeyPath  string        // the node's WireGuard key, made on first start
	ExtIf    string
	ZoneFile string
	Logger   *slog.Logger
}

// NewPFNetwork sets the node's network up (modules, sysctls, legion0, wg0,
// routes; nothing already in place is changed) and returns it ready for
// pods.
func NewPFNetwork(ctx context.Context, cfg PFNetworkConfig) (*PFNetwork, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nn, err := cfg.Host.SetUpNode(ctx, netbsd.NodeConfig{Plan: cfg.Plan, Subnet: cfg.Node.Subnet, KeyPath: cfg.KeyPath})
	if err != nil {
		return nil, fmt.Errorf("node network: %w", err)
	}
	cfg.Node.PublicKey = nn.PublicKey
	guards := netbsd.NewGuards(netbsd.SystemClock{})
	return &PFNetwork{Host: cfg.Host, PF: &netbsd.PF{R: cfg.Host.R, Log: log, Guards: guards}, Guards: guards,
		Node: cfg.Node, Plan: cfg.Plan, Net: nn, ExtIf: cfg.ExtIf, ZoneFile: cfg.ZoneFile, Logger: log,
		Mesh:  &netbsd.Mesh{R: cfg.Host.R, Self: cfg.Node.Name, Plan: cfg.Plan},
		addrs: map[string]netip.Addr{}, pods: map[string]netbsd.Pod{}}, nil
}

// Nameserver is the node resolver as pods reach it: the bridge's gateway.
func (n *PFNetwork) Nameserver() string { return n.Plan.Gateway(n.Node.Subnet).String() }

// Attach gives the task's pod the lowest free address of the node's
// subnet, or the one its status records (kept across agent restarts).
func (n *PFNetwork) Attach(_ context.Context, t *legion.Task) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	uid := t.Metadata.UID
	if _, ok := n.addrs[uid]; !ok {
		if a, err := netip.ParseAddr(t.Status.IP); err == nil && n.Plan.NodeSubnet(n.Node.Subnet).Contains(a) {
			n.addrs[uid] = a
		}
	}
	a, err := n.Plan.AssignPodAddr(n.Node.Subnet, n.addrs, uid)
	if err != nil {
		return "", err
	}
	n.addrs[uid] = a
	return a.String(), nil
}

// Join gives the pod its epair (or adopts the one an earlier agent made),
// reloads the policy with the pod in it, and with hold waits until its
// guard is loaded (netbsd.GuardDeadline at most).
func (n *PFNetwork) Join(ctx context.Context, t *legion.Task, ip string, hold bool) error {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return fmt.Errorf("pod %s: address %q: %w", t.Metadata.UID, ip, err)
	}
	pod := netbsd.Pod{TaskUID: t.Metadata.UID, Namespace: t.Metadata.Namespace, Jail: t.Metadata.UID, Addr: addr}
	if t.Spec.Owner.Kind == legion.KindService {
		pod.Service = t.Spec.Owner.Name
	}
	if err := n.Host.JoinPod(ctx, pod, n.Net); err != nil {
		return err
	}
	pod.HostIf, _ = netbsd.HostIfName(pod.TaskUID)
	n.mu.Lock()
	n.pods[pod.TaskUID] = pod
	err = n.applyLocked(ctx, false)
	n.mu.Unlock()
	if err != nil {
		n.Logger.Warn("loading the pod's network policy", "pod", pod.TaskUID, "err", err)
	}
	if !hold {
		return nil
	}
	if err := n.Guards.Wait(ctx, addr); err != nil {
		return fmt.Errorf("pod %s at %s: %w", pod.TaskUID, addr, err)
	}
	return nil
}

// Detach destroys the pod's epair by its host end and takes its guard and
// address back.
func (n *PFNetwork) Detach(ctx context.Context, t *legion.Task) error {
	err := n.Host.LeavePod(ctx, t.Metadata.UID)
	n.mu.Lock()
	defer n.mu.Unlock()
	_, joined := n.pods[t.Metadata.UID]
	delete(n.pods, t.Metadata.UID)
	delete(n.addrs, t.Metadata.UID)
	if joined {
		if perr := n.applyLocked(context.WithoutCancel(ctx), false); perr != nil {
			n.Logger.Warn("reloading the network policy", "pod", t.Metadata.UID, "err", perr)
		}
	}
	return err
}

// Apply brings pf's service and policy anchors and the resolver's zone to
// the cluster's endpoints and network policy (nil: none sent, the last
// kept).
func (n *PFNetwork) Apply(ctx context.Context, services []*endpoints.Service, policies *endpoints.Policies) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if services == nil {
		services = []*endpoints.Service{}
	}
	n.services = services
	if policies != nil {
		n.policies = policies
	}
	if err := n.applyLocked(ctx, true); err != nil {
		n.Logger.Warn("applying the endpoints to pf", "err", err)
	}
}

// applyLocked loads legion/policy (and, with services, legion/svc and the
// zone) from what is known; before the first endpoints it does nothing,
// leaving what an earlier agent loaded.
func (n *PFNetwork) applyLocked(ctx context.Context, services bool) error {
	if n.services == nil {
		return nil
	}
	svcs, eps := netServices(n.services)
	var members []netbsd.Endpoint
	if n.policies != nil {
		members = netMembers(n.policies.Members, eps)
	}
	if services {
		st := &netbsd.ServiceState{Node: n.Node, Plan: n.Plan, ExtIf: n.ExtIf, Services: svcs, Endpoints: withNotReady(eps, members)}
		if _, err := n.PF.ApplyServices(ctx, st); err != nil {
			return err
		}
		// Pods are dual-stack here (5.7), so every A has its AAAA twin.
		if n.ZoneFile != "" {
			if err := resolver.WriteZone(n.ZoneFile, resolver.BuildZone(zoneServices(n.services, nil), n.Plan.Twin)); err != nil {
				n.Logger.Warn("writing the resolver's zone", "err", err)
			}
		}
	}
	labels := map[string]map[string]string{}
	for _, s := range svcs {
		labels[s.Key()] = s.Labels
	}
	pods := make([]netbsd.Pod, 0, len(n.pods))
	for _, p := range n.pods {
		if p.Service != "" {
			p.ServiceLabels = labels[p.Namespace+"/"+p.Service]
		}
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].TaskUID < pods[j].TaskUID })
	ps := &netbsd.PolicyState{Node: n.Node, Plan: n.Plan, Services: svcs, Endpoints: eps, Pods: pods}
	if n.policies != nil {
		ps.Isolation, ps.Policies = netPolicies(n.policies, n.Logger)
		ps.Endpoints = members
	}
	_, err := n.PF.ApplyPolicy(ctx, ps)
	return err
}

// netMembers lists every running task as a member of its namespace (and
// service), ready where the service's endpoints hold it.
func netMembers(members endpoints.MemberList, ready []netbsd.Endpoint) []netbsd.Endpoint {
	isReady := make(map[string]bool, len(ready))
	for _, e := range ready {
		isReady[e.Namespace+"/"+e.TaskUID] = true
	}
	out := make([]netbsd.Endpoint, 0, members.Len())
	for m := range members.All() {
		a, err := netip.ParseAddr(m.IP)
		if err != nil || !a.Is4() {
			continue
		}
		out = append(out, netbsd.Endpoint{Namespace: m.Namespace, Service: m.Service, TaskUID: m.Task, Node: m.Node, Addr: a,
			Ready: isReady[m.Namespace+"/"+m.Task]})
	}
	return out
}

// withNotReady is the ready endpoints and the running tasks out of them
// (not ready, stopping, on a suspect node), so that pf keeps the states of
// a task leaving its table until the task is gone (5.4). Without members
// (none received), every task leaving a table counts as gone.
func withNotReady(ready, members []netbsd.Endpoint) []netbsd.Endpoint {
	out := slices.Clip(ready) // appending copies: ready stays as it is
	for _, m := range members {
		if !m.Ready {
			out = append(out, m)
		}
	}
	return out
}

// netPolicies translates the isolation modes and NetworkPolicies into the
// network's terms. An egress rule naming a network that does not parse
// (admission refuses them) is left out, and said.
func netPolicies(p *endpoints.Policies, log *slog.Logger) (map[string]netbsd.Isolation, []netbsd.Policy) {
	iso := make(map[string]netbsd.Isolation, len(p.Isolation))
	for ns, m := range p.Isolation {
		iso[ns] = netbsd.Isolation(m)
	}
	ports := func(ps []legion.PolicyPort) []netbsd.PolicyPort {
		var out []netbsd.PolicyPort
		for _, pp := range ps {
			out = append(out, netbsd.PolicyPort{Proto: netbsd.Proto(pp.Protocol), Port: uint16(pp.Port)})
		}
		return out
	}
	out := make([]netbsd.Policy, 0, len(p.Policies))
	for _, pol := range p.Policies {
		np := netbsd.Policy{Namespace: pol.Namespace, Name: pol.Name, Services: pol.Spec.Services}
		for _, r := range pol.Spec.Ingress {
			rule := netbsd.PolicyRule{Ports: ports(r.Ports)}
			for _, f := range r.From {
				rule.Peers = append(rule.Peers, netbsd.Peer{Namespace: f.Namespace, ServiceLabels: f.Services})
			}
			np.Ingress = append(np.Ingress, rule)
		}
		if pol.Spec.Egress != nil {
			egress := []netbsd.PolicyRule{}
			for _, r := range *pol.Spec.Egress {
				rule, ok := netbsd.PolicyRule{Ports: ports(r.Ports)}, true
				for _, to := range r.To {
					peer := netbsd.Peer{Namespace: to.Namespace, ServiceLabels: to.Services}
					if to.CIDR != "" {
						c, err := netip.ParsePrefix(to.CIDR)
						if err != nil {
							ok = false
							break
						}
						peer = netbsd.Peer{CIDR: c}
					}
					rule.Peers = append(rule.Peers, peer)
				}
				if !ok {
					// Dropping the whole rule allows less; dropping the
					// peer would leave a rule allowing anywhere.
					log.Warn("network policy: egress rule with a bad network left out", "policy", pol.Namespace+"/"+pol.Name)
					continue
				}
				egress = append(egress, rule)
			}
			np.Egress = &egress
		}
		out = append(out, np)
	}
	return iso, out
}

// netServices translates the endpoints into the network's terms. Every
// endpoint listed is ready: the endpoints carry ready tasks only (the
// others are among the policy members, withNotReady).
func netServices(services []*endpoints.Service) ([]netbsd.Service, []netbsd.Endpoint) {
	var svcs []netbsd.Service
	var eps []netbsd.Endpoint
	for _, s := range services {
		ns := netbsd.Service{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels}
		if a, err := netip.ParseAddr(s.VIP); err == nil && !s.DNSRR {
			ns.VIP = a
		}
		for _, p := range s.Ports {
			ns.Ports = append(ns.Ports, netbsd.ServicePort{Name: p.Name, Proto: netbsd.Proto(p.Protocol),
				Port: uint16(p.Port), TargetPort: uint16(p.TargetPort), Publish: netbsd.Publish(p.Publish), PublishedPort: uint16(p.PublishedPort)})
		}
		svcs = append(svcs, ns)
		for _, t := range s.Tasks {
			a, err := netip.ParseAddr(t.IP)
			if err != nil || !a.Is4() {
				continue
			}
			eps = append(eps, netbsd.Endpoint{Namespace: s.Namespace, Service: s.Name, TaskUID: t.Name, Node: t.Node, Addr: a, Ready: true})
		}
	}
	return svcs, eps
}

// zoneServices is the resolver's view of the endpoints; vip maps a VIP to
// where this host serves it (nil: as it is).
func zoneServices(services []*endpoints.Service, vip func(netip.Addr) netip.Addr) []resolver.Service {
	var zone []resolver.Service
	for _, s := range services {
		zs := resolver.Service{Namespace: s.Namespace, Name: s.Name, DNSRR: s.DNSRR, Stateful: s.Stateful}
		if a, err := netip.ParseAddr(s.VIP); err == nil && a.Is4() && !s.DNSRR {
			if vip != nil {
				a = vip(a)
			}
			zs.VIP = a.String()
		}
		for _, t := range s.Tasks {
			zs.Tasks = append(zs.Tasks, resolver.Task{IP: t.IP, Ready: true, Ordinal: t.Slot})
		}
		zone = append(zone, zs)
	}
	return zone
}

// ApplyPeers brings wg0's peers to the mesh's nodes (this one left out),
// adding, changing and removing only the peers that differ.
func (n *PFNetwork) ApplyPeers(ctx context.Context, peers []endpoints.Peer) {
	nodes := make([]netbsd.Node, 0, len(peers))
	for _, p := range peers {
		sub, err := subnetOf(n.Plan, p.PodCIDR)
		if err != nil {
			n.Logger.Warn("mesh peer left out", "node", p.Name, "err", err)
			continue
		}
		nd := netbsd.Node{Name: p.Name, Subnet: sub, PublicKey: p.PublicKey}
		if ap, err := netip.ParseAddrPort(p.Endpoint); err == nil {
			nd.Endpoint = ap
		}
		nodes = append(nodes, nd)
	}
	if _, err := n.Mesh.Converge(ctx, nodes); err != nil {
		n.Logger.Warn("converging the mesh", "err", err)
	}
}
