package netbsd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/legionbsd/legion/sys"
)

func svc(ns, name, vip string, port, target uint16, labels map[string]string) Service {
	return Service{Namespace: ns, Name: name, VIP: addr(vip), Labels: labels,
		Ports: []ServicePort{{Name: "main", Proto: TCP, Port: port, TargetPort: target}}}
}

func task(ns, service, uid, node, a string) Endpoint {
	return Endpoint{Namespace: ns, Service: service, TaskUID: uid, Node: node, Addr: addr(a), Ready: true}
}

func pod(ns, service string, labels map[string]string, uid, a string) Pod {
	lp, err := HostIfName(uid)
	if err != nil {
		panic(err)
	}
	return Pod{TaskUID: uid, Namespace: ns, Service: service, ServiceLabels: labels, HostIf: lp, Addr: addr(a)}
}

// policyLab: namespace shop (default isolation), pub (open), vault
// (locked) and front (default) on node n3, with a policy letting front's
// gateway into shop's web, one letting shop's web into vault, and egress
// limits on shop's web (to db and vault) and db (to a network only).
func policyLab() PolicyState {
	web, db := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	gw, site, secrets := map[string]string{"app": "gw"}, map[string]string{"app": "site"}, map[string]string{"app": "secrets"}
	webEgress := []PolicyRule{
		{Peers: []Peer{{ServiceLabels: db}}, Ports: []PolicyPort{{Proto: TCP, Port: 5432}}},
		{Peers: []Peer{{Namespace: "vault"}}, Ports: []PolicyPort{{Proto: TCP, Port: 8200}}},
	}
	dbEgress := []PolicyRule{{Peers: []Peer{{CIDR: netip.MustParsePrefix("192.0.2.0/24")}}, Ports: []PolicyPort{{Proto: TCP, Port: 443}}}}
	return PolicyState{
		Node:      labNodes()[2],
		Isolation: map[string]Isolation{"pub": IsolationOpen, "vault": IsolationLocked},
		Policies: []Policy{
			{Namespace: "shop", Name: "gw-to-web", Services: web,
				Ingress: []PolicyRule{{Peers: []Peer{{Namespace: "front", ServiceLabels: gw}}, Ports: []PolicyPort{{Proto: TCP, Port: 8080}}}}},
			{Namespace: "shop", Name: "web-egress", Services: web, Egress: &webEgress},
			{Namespace: "shop", Name: "db-egress", Services: db, Egress: &dbEgress},
			{Namespace: "vault", Name: "shop-web-in",
				Ingress: []PolicyRule{{Peers: []Peer{{Namespace: "shop", ServiceLabels: web}}, Ports: []PolicyPort{{Proto: TCP, Port: 8200}}}}},
		},
		Services: []Service{
			svc("shop", "web", "10.201.0.5", 80, 8080, web),
			svc("shop", "db", "10.201.0.6", 5432, 5432, db),
			svc("front", "gw", "10.201.0.8", 80, 8080, gw),
			svc("pub", "site", "10.201.0.9", 80, 8080, site),
			svc("vault", "secrets", "10.201.0.10", 8200, 8200, secrets),
		},
		Endpoints: []Endpoint{
			task("shop", "web", "0000000000000000000000000000a017", "n3", "10.200.3.17"),
			task("shop", "web", "0000000000000000000000000000b017", "n1", "10.200.1.17"),
			task("shop", "db", "0000000000000000000000000000a019", "n3", "10.200.3.19"),
			task("front", "gw", "0000000000000000000000000000c005", "n2", "10.200.2.5"),
			task("pub", "site", "0000000000000000000000000000a030", "n3", "10.200.3.30"),
			task("vault", "secrets", "0000000000000000000000000000a040", "n3", "10.200.3.40"),
			task("shop", "", "0000000000000000000000000000c050", "n2", "10.200.2.50"), // a Job's task
		},
		Pods: []Pod{
			pod("shop", "web", web, "0000000000000000000000000000a017", "10.200.3.17"),
			pod("shop", "db", db, "0000000000000000000000000000a019", "10.200.3.19"),
			pod("pub", "site", site, "0000000000000000000000000000a030", "10.200.3.30"),
			pod("vault", "secrets", secrets, "0000000000000000000000000000a040", "10.200.3.40"),
		},
	}
}

func TestPolicyGolden(t *testing.T) {
	t.Parallel()
	an, err := RenderPolicy(policyLab())
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	d.section("anchor "+an.Path+" on n3", an.Text())
	golden(t, "policy_isolation_modes", d.String())

	text := an.Text()
	for _, want := range []string{
		// web may use db's VIP (same namespace, its egress names db) and
		// vault's (vault's policy lets shop's web in on 8200)...
		"pass in quick on lp00000000a017 inet proto tcp from 10.200.3.17 to 10.201.0.6 port 5432 keep state (if-bound)",
		"pass in quick on lp00000000a017 inet6 proto tcp from fd00:10:200:3::11 to fd00:10:201::a port 8200 keep state (if-bound)",
		// ...front's gateway reaches web on 8080, here and over the mesh...
		"pass out quick on lp00000000a017 inet proto tcp from <peer_",
		"pass in quick on wg0 inet proto tcp from <peer_",
		// ...db sends only DNS and to its network, IPv4 only.
		"pass in quick on lp00000000a019 inet proto { tcp udp } from 10.200.3.19 to 10.200.3.1 port 53 keep state (if-bound)",
		"pass in quick on lp00000000a019 inet proto tcp from 10.200.3.19 to 192.0.2.0/24 port 443 keep state (if-bound)",
		"pass out quick on legion0 inet to 10.200.3.19 keep state (floating)",
		// The open namespace lets anyone in; neighbour discovery passes.
		"pass out quick on lp00000000a030 inet from any to 10.200.3.30",
		"pass quick on lp00000000a030 inet6 proto icmp6 icmp6-type { neighbrsol neighbradv } no state",
		"block drop in quick on wg0 inet6 from fd00:10:200::/48 to fd00:10:200:3::/64",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("anchor lacks %q", want)
		}
	}
	for _, refused := range []string{
		"from 10.200.3.17 to 10.201.0.9 ",        // web's egress does not name pub/site
		"from 10.200.3.17 to 10.201.0.5 ",        // nor web itself
		"from 10.200.3.30 to 10.201.0.5 ",        // pub is not let into shop
		"from 10.200.3.40 to 10.201.0.10 ",       // locked: not even the namespace's own
		"to fd00:10:200:3::13 port 443",          // networks are IPv4 only
		"<ns_vault> to 10.200.3.40",              // locked: no namespace table on its guard
		"from 10.200.3.19 to 10.201.0.6 port",    // db's egress names only a network
		"inet6 proto tcp from fd00:10:200:3::13", // ...in no family
	} {
		if strings.Contains(text, refused) {
			t.Errorf("anchor has %q", refused)
		}
	}
	tables := map[string][]netip.Addr{}
	for _, tb := range an.Tables {
		tables[tb.Name] = tb.Addrs
	}
	if got := tables["ns_shop"]; len(got) != 8 { // web x2, db, the Job's task; both families
		t.Errorf("ns_shop holds %v", got)
	}
}

// Every rule has its IPv6 twin, except what only IPv4 can do (egress to a
// network); the IPv6 rules name the twins of the IPv4 addresses.
func TestEveryRuleIsTwinned(t *testing.T) {
	t.Parallel()
	st := oneNodeState()
	svcAnchor, err := RenderServices(st)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := RenderPolicy(policyLab())
	if err != nil {
		t.Fatal(err)
	}
	for _, an := range []Anchor{svcAnchor, pol} {
		lines := strings.Split(an.Rules, "\n")
		for i, l := range lines {
			if !strings.Contains(l, " inet ") || strings.Contains(l, "192.0.2.0/24") {
				continue
			}
			if i+1 >= len(lines) || !strings.Contains(lines[i+1], " inet6 ") {
				t.Errorf("%s: %q has no inet6 twin after it", an.Path, l)
				continue
			}
			twin := lines[i+1]
			for _, w := range strings.Fields(l) {
				a, err := netip.ParseAddr(w)
				if err != nil {
					continue
				}
				if tw, ok := addrplan.Twin(a); ok && !strings.Contains(twin, tw.String()) {
					t.Errorf("%s: twin of %q lacks %s: %q", an.Path, l, tw, twin)
				}
			}
		}
	}
}

// fakeClock fires After only when the test says so.
type fakeClock struct {
	mu    sync.Mutex
	calls int
	timer []chan time.Time
}

func (c *fakeClock) After(time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.calls++
	c.timer = append(c.timer, ch)
	return ch
}

func (c *fakeClock) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *fakeClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.timer {
		ch <- time.Time{}
	}
	c.timer = nil
}

// waitFor polls cond until it holds or a real deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, 5*time.Second, time.Millisecond, cond)
}

// A new pod is held until a pass has loaded its guard; a pod whose guard
// pf refuses fails after GuardDeadline.
func TestGuardBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{}
	guards := NewGuards(clock)
	f := readyPF(sys.NewFake())
	pf := &PF{R: f, Log: quiet(), Guards: guards}
	st := policyLab()
	newPod := pod("shop", "web", map[string]string{"app": "web"}, "0000000000000000000000000000a099", "10.200.3.99")

	done := make(chan error, 1)
	go func() { done <- guards.Wait(ctx, newPod.Addr) }()
	waitFor(t, "the pod to wait", func() bool { return clock.waiting() == 1 })
	if _, err := pf.ApplyPolicy(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if guards.Guarded(newPod.Addr) {
		t.Fatal("a pod not in the loaded policy is not guarded")
	}
	st.Pods = append(st.Pods, newPod)
	plan, err := pf.ApplyPolicy(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.RulesChanged {
		t.Error("a new pod's guard is a rule change")
	}
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
	if !strings.Contains(string(f.Calls()[len(f.Calls())-1].Stdin), "on lp00000000a099") {
		t.Error("the loaded anchor lacks the new pod's guard")
	}

	// pf refuses the rules: the next pod is never guarded and fails.
	refused := pod("shop", "web", map[string]string{"app": "web"}, "0000000000000000000000000000a098", "10.200.3.98")
	f.On("pfctl -a legion/policy -f -", sys.Answer{Code: 1, Stderr: "stdin:12: syntax error\npfctl: Syntax error in config file: pf rules not loaded\n"})
	st.Pods = append(st.Pods, refused)
	if _, err := pf.ApplyPolicy(ctx, &st); err == nil {
		t.Fatal("a refused anchor must be an error")
	}
	go func() { done <- guards.Wait(ctx, refused.Addr) }()
	waitFor(t, "the refused pod to wait", func() bool { return clock.waiting() == 2 })
	clock.fire()
	if err := <-done; !errors.Is(err, ErrNotGuarded) {
		t.Fatalf("want ErrNotGuarded, got %v", err)
	}
	if !guards.Guarded(newPod.Addr) {
		t.Error("a refused reload must not unguard pods loaded before")
	}
}

func TestPolicyTableOnlyUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake()
	pf := &PF{R: f, Log: quiet()}
	st := policyLab()
	if _, err := pf.ApplyPolicy(ctx, &st); err != nil {
		t.Fatal(err)
	}
	f.Reset()
	st.Endpoints = append(st.Endpoints, task("front", "gw", "0000000000000000000000000000c006", "n1", "10.200.1.6"))
	plan, err := pf.ApplyPolicy(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if plan.RulesChanged || len(plan.TablesChanged) != 1 || len(f.Lines()) != 1 || !strings.HasPrefix(f.Lines()[0], "pfctl -a legion/policy -t peer_") {
		t.Errorf("a new member must only replace its table: %+v %q", plan, f.Lines())
	}
}

func TestPolicyRefusesIPv6Egress(t *testing.T) {
	t.Parallel()
	st := policyLab()
	eg := []PolicyRule{{Peers: []Peer{{CIDR: netip.MustParsePrefix("2001:db8::/32")}}}}
	st.Policies = append(st.Policies, Policy{Namespace: "shop", Name: "v6", Egress: &eg})
	if _, err := RenderPolicy(st); err == nil || !strings.Contains(err.Error(), "only IPv4") {
		t.Errorf("got %v", err)
	}
}

// egress: [] allows nothing more than DNS; a policy without egress limits
// nothing.
func TestEmptyEgressAllowsOnlyDNS(t *testing.T) {
	t.Parallel()
	st := policyLab()
	none := []PolicyRule{}
	st.Policies = []Policy{{Namespace: "pub", Name: "quiet", Egress: &none}}
	an, err := RenderPolicy(st)
	if err != nil {
		t.Fatal(err)
	}
	var site []string
	for _, l := range strings.Split(an.Rules, "\n") {
		if strings.HasPrefix(l, "pass in quick on lp00000000a030") && !strings.Contains(l, "to 10.201.") && !strings.Contains(l, "to fd00:10:201:") {
			site = append(site, l)
		}
	}
	want := []string{
		"pass in quick on lp00000000a030 inet proto { tcp udp } from 10.200.3.30 to 10.200.3.1 port 53 keep state (if-bound)",
		"pass in quick on lp00000000a030 inet6 proto { tcp udp } from fd00:10:200:3::1e to fd00:10:200:3::1 port 53 keep state (if-bound)",
	}
	if strings.Join(site, "\n") != strings.Join(want, "\n") {
		t.Errorf("pod sends:\n%s", strings.Join(site, "\n"))
	}
	if strings.Contains(an.Rules, "from 10.200.3.30 to 10.201.0.9") {
		t.Error("egress: [] must not allow the pod's own VIP")
	}
}

func TestSamePeersTwiceRenderOnce(t *testing.T) {
	t.Parallel()
	st := policyLab()
	st.Policies = append(st.Policies, st.Policies[0]) // the same allowance again, under another name
	st.Policies[len(st.Policies)-1].Name = "gw-to-web-again"
	an, err := RenderPolicy(st)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(an.Rules, "pass out quick on lp00000000a017 inet proto tcp from <peer_b43b5d21>"); n != 1 {
		t.Errorf("rule rendered %d times", n)
	}
}

// The fingerprint the applier reuses rules by moves with every input of
// the rules and with no endpoint.
func TestPolicyRulesKey(t *testing.T) {
	t.Parallel()
	base := policyRulesKey(ptr(policyLab()))
	same := policyLab()
	same.Endpoints = append(same.Endpoints, task("front", "gw", "0000000000000000000000000000c007", "n1", "10.200.1.7"))
	same.Endpoints[0].Ready = false
	if policyRulesKey(&same) != base {
		t.Error("endpoints must not change the rules' fingerprint")
	}
	for name, change := range map[string]func(*PolicyState){
		"isolation":    func(s *PolicyState) { s.Isolation["shop"] = IsolationLocked },
		"policy port":  func(s *PolicyState) { s.Policies[0].Ingress[0].Ports[0].Port = 8081 },
		"egress nil":   func(s *PolicyState) { s.Policies[1].Egress = nil },
		"egress empty": func(s *PolicyState) { e := []PolicyRule{}; s.Policies[1].Egress = &e },
		"peer labels": func(s *PolicyState) {
			s.Policies[0].Ingress[0].Peers[0].ServiceLabels = map[string]string{"app": "other"}
		},
		"service vip":   func(s *PolicyState) { s.Services[0].VIP = addr("10.201.0.99") },
		"service label": func(s *PolicyState) { s.Services[1].Labels = map[string]string{"app": "db", "x": "y"} },
		"pod":           func(s *PolicyState) { s.Pods = s.Pods[1:] },
		"pod address":   func(s *PolicyState) { s.Pods[0].Addr = addr("10.200.3.99") },
	} {
		st := policyLab()
		change(&st)
		if policyRulesKey(&st) == base {
			t.Errorf("%s: fingerprint unchanged", name)
		}
	}
}

// Whatever the sequence of changes, the applier loads what RenderPolicy
// renders for the last state.
func TestPolicyApplierMatchesRender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake()
	pf := &PF{R: f, Log: quiet()}
	st := policyLab()
	steps := []func(){
		func() {
			st.Endpoints = append(st.Endpoints, task("front", "gw", "0000000000000000000000000000c008", "n1", "10.200.1.8"))
		},
		func() { st.Isolation["pub"] = IsolationNamespace },
		func() { st.Endpoints = st.Endpoints[1:] },
		func() { st.Pods = st.Pods[:2] },
	}
	for i, step := range steps {
		step()
		if _, err := pf.ApplyPolicy(ctx, &st); err != nil {
			t.Fatal(err)
		}
		want, err := RenderPolicy(st)
		if err != nil {
			t.Fatal(err)
		}
		got := pf.loaded[AnchorPolicy]
		if got.Rules != want.Rules {
			t.Errorf("step %d: loaded rules differ from rendered", i)
		}
		for _, tb := range want.Tables {
			if strings.Join(addrStrings(got.Tables[tb.Name]), " ") != strings.Join(addrStrings(tb.Addrs), " ") {
				t.Errorf("step %d: table %s differs", i, tb.Name)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// The main ruleset reaches legion/* anchors in name order, so legion/policy
// comes before legion/svc and a quick pass there ends the evaluation
// before svc's MSS clamp: every quick pass out on wg0 in legion/policy
// must clamp the MSS itself, to what fits wg0's MTU.
func TestPolicyQuickPassOnMeshClampsMSS(t *testing.T) {
	t.Parallel()
	if !(AnchorPolicy < AnchorServices) {
		t.Fatalf("this test assumes %s is evaluated before %s", AnchorPolicy, AnchorServices)
	}
	an, err := RenderPolicy(policyLab())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, line := range strings.Split(an.Rules, "\n") {
		if !strings.HasPrefix(line, "pass out quick on "+WGIface+" ") {
			continue
		}
		n++
		want := fmt.Sprintf("scrub (max-mss %d)", MTU-40)
		if strings.Contains(line, " inet6 ") {
			want = fmt.Sprintf("scrub (max-mss %d)", MTU-60)
		}
		if !strings.Contains(line, want) {
			t.Errorf("%q: a quick pass out on %s without %q", line, WGIface, want)
		}
	}
	if n == 0 {
		t.Fatalf("no quick pass out on %s in:\n%s", WGIface, an.Rules)
	}
}

// readyPF scripts pf enabled with a main ruleset calling legion/*, as
// pfctl prints them.
func readyPF(f *sys.Fake) *sys.Fake {
	return f.On("pfctl -s info", sys.PfInfo(true)).
		On("pfctl -s nat", sys.Answer{Stdout: "nat-anchor \"legion/*\" all\nrdr-anchor \"legion/*\" all\n"}).
		On("pfctl -s rules", sys.Answer{Stdout: "scrub in all fragment reassemble\nanchor \"legion/*\" all\npass all flags S/SA keep state\n"})
}

// Pods are marked guarded only when pf applies the anchor: pf enabled and
// the main ruleset calling legion/*. Otherwise the anchor loads, but the
// pods wait and fail, and the error says what is missing.
func TestPolicyGuardsOnlyWhenMainCallsAnchors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    *sys.Fake
		want string
	}{
		{"pf disabled", sys.NewFake().On("pfctl -s info", sys.PfInfo(false)), "pf is not enabled"},
		{"no anchor call", sys.NewFake().On("pfctl -s info", sys.PfInfo(true)).
			On("pfctl -s nat", sys.Answer{Stdout: "nat-anchor \"legion/*\" all\nrdr-anchor \"legion/*\" all\n"}).
			On("pfctl -s rules", sys.Answer{Stdout: "pass all flags S/SA keep state\n"}), `lacks anchor "legion/*"`},
		{"no nat calls", sys.NewFake().On("pfctl -s info", sys.PfInfo(true)).
			On("pfctl -s rules", sys.Answer{Stdout: "anchor \"legion/*\" all\n"}), `lacks nat-anchor "legion/*", rdr-anchor "legion/*"`},
		{"ready", readyPF(sys.NewFake()), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			guards := NewGuards(&fakeClock{})
			pf := &PF{R: c.f, Log: quiet(), Guards: guards}
			st := policyLab()
			_, err := pf.ApplyPolicy(ctx, &st)
			if c.want == "" {
				if err != nil || !guards.Guarded(st.Pods[0].Addr) {
					t.Fatalf("ready pf: err %v, guarded %v", err, guards.Guarded(st.Pods[0].Addr))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error saying %q, got %v", c.want, err)
			}
			if guards.Guarded(st.Pods[0].Addr) {
				t.Fatal("a pod was marked guarded by an anchor pf never evaluates")
			}
		})
	}
}
