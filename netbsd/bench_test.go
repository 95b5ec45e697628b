package netbsd

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// bigCluster: 256 nodes, 2,000 services in 20 namespaces (every fourth
// with a second port, every tenth published), 20,000 endpoints spread over
// the nodes, 100 policies; the local pods are node 7's.
func bigCluster() (ServiceState, PolicyState) {
	const nodes, services, endpoints, namespaces = 256, 2000, 20000, 20
	var svcs []Service
	for i := range services {
		s := Service{
			Namespace: fmt.Sprintf("ns%02d", i%namespaces),
			Name:      fmt.Sprintf("svc%04d", i),
			VIP:       netip.AddrFrom4([4]byte{10, 201, byte((i + 1) >> 8), byte(i + 1)}),
			Labels:    map[string]string{"app": fmt.Sprintf("svc%04d", i), "tier": fmt.Sprint(i % 3)},
			Ports:     []ServicePort{{Name: "http", Proto: TCP, Port: 80, TargetPort: 8080}},
		}
		if i%4 == 0 {
			s.Ports = append(s.Ports, ServicePort{Name: "metrics", Proto: TCP, Port: 9100, TargetPort: 9100})
		}
		if i%10 == 0 {
			s.Ports[0].Publish, s.Ports[0].PublishedPort = PublishIngress, uint16(30000+i)
		}
		svcs = append(svcs, s)
	}
	self := Node{Name: "node007", Subnet: 7}
	var eps []Endpoint
	var pods []Pod
	perNode := map[int]int{}
	for i := range endpoints {
		s := svcs[i%services]
		n := i % nodes
		perNode[n]++
		a := netip.AddrFrom4([4]byte{10, 200, byte(n), byte(1 + perNode[n])})
		uid := fmt.Sprintf("%032x", i)
		eps = append(eps, Endpoint{Namespace: s.Namespace, Service: s.Name, TaskUID: uid, Node: fmt.Sprintf("node%03d", n), Addr: a, Ready: true})
		if n == self.Subnet {
			lp, _ := HostIfName(uid)
			pods = append(pods, Pod{TaskUID: uid, Namespace: s.Namespace, Service: s.Name, ServiceLabels: s.Labels, HostIf: lp, Addr: a})
		}
	}
	var pols []Policy
	for i := range 100 {
		ns := fmt.Sprintf("ns%02d", i%namespaces)
		p := Policy{Namespace: ns, Name: fmt.Sprintf("p%d", i), Services: map[string]string{"tier": fmt.Sprint(i % 3)},
			Ingress: []PolicyRule{{Peers: []Peer{{Namespace: fmt.Sprintf("ns%02d", (i+1)%namespaces), ServiceLabels: map[string]string{"tier": "1"}}}, Ports: []PolicyPort{{Proto: TCP, Port: 8080}}}}}
		if i%10 == 0 {
			eg := []PolicyRule{{Peers: []Peer{{CIDR: netip.MustParsePrefix("192.0.2.0/24")}}}, {Peers: []Peer{{ServiceLabels: map[string]string{"tier": "2"}}}}}
			p.Egress = &eg
		}
		pols = append(pols, p)
	}
	return ServiceState{Node: self, ExtIf: "em0", Services: svcs, Endpoints: eps},
		PolicyState{Node: self, Isolation: map[string]Isolation{"ns03": IsolationOpen, "ns04": IsolationLocked}, Policies: pols, Services: svcs, Endpoints: eps, Pods: pods}
}

func BenchmarkRenderFullRuleSet(b *testing.B) {
	svc, pol := bigCluster()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		a1, err := RenderServices(svc)
		if err != nil {
			b.Fatal(err)
		}
		a2, err := RenderPolicy(pol)
		if err != nil {
			b.Fatal(err)
		}
		size = len(a1.Text()) + len(a2.Text())
	}
	b.ReportMetric(float64(size), "bytes/ruleset")
}

// One endpoint's readiness flips: render, compare and replace one table.
func BenchmarkIncrementalEndpointChange(b *testing.B) {
	svc, _ := bigCluster()
	ctx := context.Background()
	pf := &PF{R: sys.NewFake(), Log: quiet()}
	if _, err := pf.ApplyServices(ctx, &svc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		svc.Endpoints[1234].Ready = !svc.Endpoints[1234].Ready
		plan, err := pf.ApplyServices(ctx, &svc)
		if err != nil {
			b.Fatal(err)
		}
		if plan.RulesChanged || len(plan.TablesChanged) != 1 {
			b.Fatalf("plan %+v", plan)
		}
	}
}

// One task joins a namespace: the policy rules are reused, one table is
// replaced.
func BenchmarkIncrementalPolicyMemberChange(b *testing.B) {
	_, pol := bigCluster()
	ctx := context.Background()
	pf := &PF{R: sys.NewFake(), Log: quiet()}
	if _, err := pf.ApplyPolicy(ctx, &pol); err != nil {
		b.Fatal(err)
	}
	extra := Endpoint{Namespace: "ns05", Service: "svc0005", TaskUID: "x", Node: "node009", Addr: netip.AddrFrom4([4]byte{10, 200, 9, 250}), Ready: true}
	base := pol.Endpoints
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			pol.Endpoints = append(base[:len(base):len(base)], extra)
		} else {
			pol.Endpoints = base
		}
		i++
		plan, err := pf.ApplyPolicy(ctx, &pol)
		if err != nil {
			b.Fatal(err)
		}
		if plan.RulesChanged {
			b.Fatal("rules reloaded for a member change")
		}
	}
}

// Converging wg0 to 255 peers from none, and then for one node joining.
func BenchmarkPlanPeers256(b *testing.B) {
	nodes := make([]Node, 256)
	current := make([]WGPeer, 0, 256)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("node%03d", i), Subnet: i, PublicKey: fmt.Sprintf("PUB%03d", i),
			Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), WGPort)}
		if i > 1 && i < 255 {
			current = append(current, WGPeer{PublicKey: nodes[i].PublicKey, Endpoint: nodes[i].Endpoint, AllowedIPs: PeerAllowedIPs(addrplan.Plan{}, nodes[i]), Keepalive: Keepalive})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		cmds, _ := PlanPeers(addrplan.Plan{}, "node000", current, nodes, nil)
		if len(cmds) != 2 {
			b.Fatalf("%d commands", len(cmds))
		}
	}
}
