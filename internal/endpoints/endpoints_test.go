package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

func TestCompute(t *testing.T) {
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  pod: {containers: [{name: w, image: x, ports: [{name: http, containerPort: 8080}]}]}
  endpoint: {ports: [{port: 80, targetPort: http, publish: ingress, publishedPort: 8000}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  pod: {containers: [{name: d, image: x}]}
  endpoint: {mode: dnsrr}
`))
	if err != nil {
		t.Fatal(err)
	}
	web, db := objs[0].(*legion.Service), objs[1].(*legion.Service)
	web.Status.VIP = "10.201.0.1"
	db.Status.VIP = "10.201.0.2" // dnsrr: never given out
	task := func(name, owner, ip string, slot int, ready bool, state legion.TaskState) *legion.Task {
		return &legion.Task{Header: legion.Header{Metadata: legion.Metadata{Name: name, Namespace: "default"}},
			Spec:   legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: owner}, Node: "n1", Slot: slot, DesiredState: legion.TaskRunning},
			Status: legion.TaskStatus{State: state, Ready: ready, IP: ip}}
	}
	stopping := task("web-3-1", "web", "10.200.0.9", 3, true, legion.TaskRunning)
	stopping.Spec.DesiredState = legion.TaskShutdown
	got := Compute([]*legion.Service{web, db}, []*legion.Task{
		task("web-2-1", "web", "10.200.0.3", 2, true, legion.TaskRunning),
		task("web-1-1", "web", "10.200.0.2", 1, true, legion.TaskRunning),
		task("web-1-0", "web", "10.200.0.5", 1, false, legion.TaskRunning), // not ready
		stopping,
		task("db-0", "db", "10.200.0.4", 0, true, legion.TaskRunning),
		task("db-1", "db", "", 1, true, legion.TaskStarting),
	})
	want := []Service{
		{Namespace: "default", Name: "db", DNSRR: true, Stateful: true, Tasks: []*Task{{Name: "db-0", IP: "10.200.0.4", Node: "n1", Slot: 0}}},
		{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}, VIP: "10.201.0.1",
			Ports: []Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080, Publish: legion.PublishIngress, PublishedPort: 8000}},
			Tasks: []*Task{{Name: "web-1-1", IP: "10.200.0.2", Node: "n1", Slot: 1}, {Name: "web-2-1", IP: "10.200.0.3", Node: "n1", Slot: 2}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("endpoints (-want +got):\n%s", d)
	}
}

func TestPeers(t *testing.T) {
	node := func(name, cidr, key, addr, endpoint string) *legion.Node {
		n := &legion.Node{}
		n.Metadata.Name = name
		n.Status.PodCIDR, n.Status.Addr = cidr, addr
		if key != "" {
			n.Status.WireGuard = &legion.WireGuard{PublicKey: key, Endpoint: endpoint}
		}
		return n
	}
	got := Peers([]*legion.Node{
		node("c", "10.200.2.0/24", "KC", "192.0.2.3", ""),
		node("a", "10.200.0.0/24", "KA", "192.0.2.1", "198.51.100.1:51821"),
		node("nokey", "10.200.3.0/24", "", "192.0.2.4", ""),
		node("nosubnet", "", "KD", "192.0.2.5", ""),
		node("behind-nat", "10.200.4.0/24", "KE", "", ""),
	})
	want := []Peer{
		{Name: "a", PodCIDR: "10.200.0.0/24", PublicKey: "KA", Endpoint: "198.51.100.1:51821"},
		{Name: "behind-nat", PodCIDR: "10.200.4.0/24", PublicKey: "KE"},
		{Name: "c", PodCIDR: "10.200.2.0/24", PublicKey: "KC", Endpoint: "192.0.2.3:51820"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Peers (-want +got):\n%s", d)
	}
	if p := Peers(nil); p == nil || len(p) != 0 {
		t.Errorf("no nodes must give an empty list, not nil (nil means none received): %#v", p)
	}
}

func TestComputePolicies(t *testing.T) {
	ns := func(name string, iso legion.Isolation) *legion.Namespace {
		n := &legion.Namespace{}
		n.Metadata.Name, n.Spec.Isolation = name, iso
		return n
	}
	pol := func(ns, name string) *legion.NetworkPolicy {
		p := &legion.NetworkPolicy{}
		p.Metadata.Namespace, p.Metadata.Name = ns, name
		p.Spec.Services = map[string]string{"tier": "db"}
		return p
	}
	task := func(ns, name string, owner legion.Kind, ownerName, ip string, state legion.TaskState) *legion.Task {
		t := &legion.Task{}
		t.Metadata.Namespace, t.Metadata.Name = ns, name
		t.Spec.Owner = legion.Owner{Kind: owner, Name: ownerName}
		t.Spec.DesiredState, t.Spec.Node = legion.TaskRunning, "n1"
		t.Status.State, t.Status.IP = state, ip
		return t
	}
	// Told to stop but running (draining): a member until it has stopped,
	// so that nodes keep its connections' states meanwhile.
	draining := task("shop", "web-4", legion.KindService, "web", "10.200.1.5", legion.TaskRunning)
	draining.Spec.DesiredState = legion.TaskShutdown
	stopped := task("shop", "web-5", legion.KindService, "web", "10.200.1.6", legion.TaskShutdown)
	stopped.Spec.DesiredState = legion.TaskShutdown
	got := ComputePolicies(
		[]*legion.Namespace{ns("default", ""), ns("shop", legion.IsolationLocked), ns("lab", legion.IsolationNamespace), ns("pub", legion.IsolationOpen)},
		[]*legion.NetworkPolicy{pol("shop", "z"), pol("shop", "a")},
		[]*legion.Task{
			task("shop", "web-1", legion.KindService, "web", "10.200.1.2", legion.TaskRunning),
			task("shop", "batch-1", legion.KindJob, "batch", "10.200.1.3", legion.TaskRunning),
			task("shop", "web-2", legion.KindService, "web", "10.200.1.4", legion.TaskStarting),
			task("shop", "web-3", legion.KindService, "web", "", legion.TaskRunning),
			draining, stopped,
		})
	want := Policies{
		Isolation: map[string]legion.Isolation{"shop": legion.IsolationLocked, "pub": legion.IsolationOpen},
		Policies: []Policy{{Namespace: "shop", Name: "a", Spec: legion.NetworkPolicySpec{Services: map[string]string{"tier": "db"}}},
			{Namespace: "shop", Name: "z", Spec: legion.NetworkPolicySpec{Services: map[string]string{"tier": "db"}}}},
		Members: MembersOf([]*Member{{Namespace: "shop", Task: "batch-1", IP: "10.200.1.3", Node: "n1"},
			{Namespace: "shop", Service: "web", Task: "web-1", IP: "10.200.1.2", Node: "n1"},
			{Namespace: "shop", Service: "web", Task: "web-4", IP: "10.200.1.5", Node: "n1"}}),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ComputePolicies (-want +got):\n%s", d)
	}
}

func TestComputeRoutes(t *testing.T) {
	route := func(ns, name, host, path, svc string, port legion.PortRef) *legion.Route {
		r := &legion.Route{}
		r.Metadata.Namespace, r.Metadata.Name = ns, name
		r.Spec = legion.RouteSpec{Host: host, Path: path, Service: svc, Port: port}
		return r
	}
	tls := route("shop", "secure", "shop.example", "/", "web", legion.PortRef{Name: "http"})
	tls.Spec.TLS = &legion.RouteTLS{Secret: "shop-cert", Redirect: true}
	tls.Spec.TrustedProxies, tls.Spec.ProxyProtocol = []string{"192.0.2.0/28"}, legion.ProxyProtocolV2
	tls.Status.Challenges = []legion.ACMEChallenge{{Host: "shop.example", Token: "tok", KeyAuthorization: "tok.key"}, {Host: "other.example", Token: "x", KeyAuthorization: "y"}}
	services := []Service{
		{Namespace: "shop", Name: "web", Ports: []Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 8080}, {Name: "admin", Protocol: legion.TCP, Port: 81, TargetPort: 9090}},
			Tasks: []*Task{{Name: "web-1", IP: "10.200.0.2"}, {Name: "web-2", IP: "10.200.1.3"}}},
		{Namespace: "shop", Name: "api", Ports: []Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 3000}}, Tasks: []*Task{{Name: "api-1", IP: "10.200.0.4"}}},
	}
	got := ComputeRoutes([]*legion.Route{
		tls,
		route("shop", "api", "api.example", "", "api", legion.PortRef{}),
		route("shop", "admin", "shop.example", "/admin", "web", legion.PortRef{Number: 81}),
		route("shop", "vague", "shop.example", "/x", "web", legion.PortRef{}),
		route("shop", "missing", "gone.example", "/", "gone", legion.PortRef{}),
	}, services)
	want := []Route{
		{Namespace: "shop", Name: "admin", Host: "shop.example", Path: "/admin", Backends: []string{"10.200.0.2:9090", "10.200.1.3:9090"}},
		{Namespace: "shop", Name: "api", Host: "api.example", Path: "/", Backends: []string{"10.200.0.4:3000"}},
		{Namespace: "shop", Name: "missing", Host: "gone.example", Path: "/"},
		{Namespace: "shop", Name: "secure", Host: "shop.example", Path: "/", Backends: []string{"10.200.0.2:8080", "10.200.1.3:8080"},
			TLSSecret: "shop-cert", Challenges: map[string]string{"tok": "tok.key"},
			TrustedProxies: []string{"192.0.2.0/28"}, ProxyProtocol: "v2", RedirectHTTPS: true},
		{Namespace: "shop", Name: "vague", Host: "shop.example", Path: "/x", Problem: "service web has several TCP ports: the route must name one"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ComputeRoutes (-want +got):\n%s", d)
	}
}

// RouteProblem says why a route leads nowhere, from the Service as
// stored: missing, a port it does not have (by name or number, its
// target named in the pod or not), several ports and none named.
func TestRouteProblem(t *testing.T) {
	svc, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  pod:
    containers: [{name: c, image: web:1, ports: [{name: http, containerPort: 8080}]}]
  endpoint:
    ports:
      - {name: http, port: 80, targetPort: http}
      - {name: admin, port: 81, targetPort: 9090}
      - {name: dns, port: 53, targetPort: 53, protocol: udp}
`))
	if err != nil {
		t.Fatal(err)
	}
	web := svc[0].(*legion.Service)
	route := func(service string, port legion.PortRef) *legion.Route {
		r := &legion.Route{}
		r.Metadata.Namespace, r.Metadata.Name = "shop", "r"
		r.Spec = legion.RouteSpec{Host: "shop.example", Service: service, Port: port}
		return r
	}
	for _, tc := range []struct {
		route *legion.Route
		svc   *legion.Service
		want  string
	}{
		{route("web", legion.PortRef{Name: "http"}), web, ""},
		{route("web", legion.PortRef{Number: 81}), web, ""},
		{route("gone", legion.PortRef{}), nil, "no service gone in namespace shop"},
		{route("web", legion.PortRef{Name: "https"}), web, "service web has no TCP port https"},
		{route("web", legion.PortRef{Number: 53}), web, "service web has no TCP port 53"},
		{route("web", legion.PortRef{}), web, "service web has several TCP ports: the route must name one"},
	} {
		if got := RouteProblem(tc.route, tc.svc); got != tc.want {
			t.Errorf("route to %s port %q: %q, want %q", tc.route.Spec.Service, tc.route.Spec.Port, got, tc.want)
		}
	}
}
