package netbsd

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// otherPlan is a cluster initialised with ranges of its own.
var otherPlan = addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}

// moveAddr carries a lab fixture address from the default plan into
// otherPlan (10.200.n.h is 10.42.n.h, 10.201.a.b is 10.43.a.b).
func moveAddr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	o := a.As4()
	switch {
	case addrplan.PodCIDR().Contains(a):
		o[1] = otherPlan.PodOctet()
	case addrplan.ServiceCIDR().Contains(a):
		o[1] = otherPlan.ServiceOctet()
	default:
		return a
	}
	return netip.AddrFrom4(o)
}

// moveText is what a rendering of the default plan's fixtures reads like
// in otherPlan: every range, address and twin moved, nothing else.
func moveText(s string) string {
	return strings.NewReplacer(
		"10.200.", "10.42.", "10.201.", "10.43.",
		"fd00:10:200:", "fd00:10:42:", "fd00:10:201:", "fd00:10:43:",
	).Replace(s)
}

// noDefaultRanges fails the test where text still names a default range.
func noDefaultRanges(t *testing.T, what, text string) {
	t.Helper()
	for _, old := range []string{"10.200.", "10.201.", "fd00:10:200:", "fd00:10:201:"} {
		if strings.Contains(text, old) {
			t.Errorf("%s still names the default range (%q):\n%s", what, old, text)
		}
	}
}

func moveServices(in []Service) []Service {
	out := cloneServices(in)
	for i := range out {
		out[i].VIP = moveAddr(out[i].VIP)
	}
	return out
}

func moveEndpoints(in []Endpoint) []Endpoint {
	out := append([]Endpoint(nil), in...)
	for i := range out {
		out[i].Addr = moveAddr(out[i].Addr)
	}
	return out
}

// A jails node of a cluster with other ranges: the node's routes and
// addresses, a pod's interface, the mesh's allowed IPs, legion/svc and
// legion/policy all follow the cluster's plan, and read exactly as the
// default plan's with the ranges moved.
func TestOtherPlanGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var d doc
	check := func(title, def, other string) {
		t.Helper()
		noDefaultRanges(t, title, other)
		if diff := cmp.Diff(moveText(def), other); diff != "" {
			t.Errorf("%s: not the default rendering with the ranges moved (-want +got):\n%s", title, diff)
		}
		d.section(title, other)
	}

	// Node set-up: legion0's gateway, the pod range routes into wg0.
	setUp := func(plan addrplan.Plan) string {
		key := filepath.Join(t.TempDir(), "wireguard.key")
		f := sys.NewFake()
		reads(f, "ifconfig legion0", sys.Answer{Code: 1, Stderr: "ifconfig: interface legion0 does not exist\n"}, sys.Answer{Stdout: bridgeNew})
		reads(f, "ifconfig wg0", sys.Answer{Code: 1, Stderr: "ifconfig: interface wg0 does not exist\n"})
		f.On("ifconfig bridge create", sys.Answer{Stdout: "legion0\n"}).
			On("wg genkey", sys.Answer{Stdout: "UFJJVjM=\n"}).
			On("wg pubkey", sys.Answer{Stdout: "PUB3\n"}).
			On("wg show wg0 dump", sys.Answer{Stdout: "(none)\t(none)\t0\toff\n"}).
			On("ip6addrctl show", sys.Answer{Stdout: ip6addrctlOut})
		nn, err := Host{R: f, Log: quiet()}.SetUpNode(ctx, NodeConfig{Plan: plan, Subnet: 3, KeyPath: key})
		if err != nil {
			t.Fatal(err)
		}
		if nn.Plan != plan {
			t.Errorf("the node net carries plan %+v, set up with %+v", nn.Plan, plan)
		}
		return strings.ReplaceAll(transcript(f.Calls()), key, "/var/db/legion/wireguard.key")
	}
	got := setUp(otherPlan)
	check("node set-up", setUp(addrplan.Plan{}), got)
	for _, want := range []string{"ifconfig legion0 inet 10.42.3.1/24", "route -n add -net 10.42.0.0/16 -interface wg0", "route -n add -inet6 -net fd00:10:42::/48 -interface wg0"} {
		if !strings.Contains(got, want) {
			t.Errorf("node set-up lacks %q:\n%s", want, got)
		}
	}

	// A pod's interface in the node's subnet.
	join := func(plan addrplan.Plan) string {
		f := reads(sys.NewFake(), "ifconfig lp00000000a017", sys.Answer{Code: 1, Stderr: "ifconfig: interface lp00000000a017 does not exist\n"}).
			On("ifconfig epair create", sys.Answer{Stdout: "epair7a\n"})
		nn, p := labNodeNet(), labPod()
		if plan != (addrplan.Plan{}) {
			nn.Plan, p.Addr = plan, moveAddr(p.Addr)
		}
		if err := (Host{R: f, Log: quiet()}).JoinPod(ctx, p, nn); err != nil {
			t.Fatal(err)
		}
		return transcript(f.Calls())
	}
	check("pod join", join(addrplan.Plan{}), join(otherPlan))
	nn := labNodeNet()
	nn.Plan = otherPlan
	if err := (Host{R: sys.NewFake(), Log: quiet()}).JoinPod(ctx, labPod(), nn); err == nil || !strings.Contains(err.Error(), "10.42.3.0/24") {
		t.Errorf("a pod address of the default range must be refused naming the node's subnet in the plan, got %v", err)
	}

	// The mesh: each peer's allowed IPs.
	peers := func(plan addrplan.Plan) string {
		cmds, _ := PlanPeers(plan, "n1", nil, labNodes(), nil)
		var b strings.Builder
		for _, c := range cmds {
			b.WriteString(sys.Command("wg", c...).String() + "\n")
		}
		return b.String()
	}
	check("wg peers of n1", peers(addrplan.Plan{}), peers(otherPlan))

	// legion/svc: hairpin and mesh NAT, VIP rdrs, tables.
	svcText := func(st ServiceState) string {
		an, err := RenderServices(st)
		if err != nil {
			t.Fatal(err)
		}
		return an.Text()
	}
	def := oneNodeState()
	def.Services = append(def.Services, Service{Namespace: "shop", Name: "edge", VIP: addr("10.201.0.7"),
		Ports: []ServicePort{{Name: "https", Proto: TCP, Port: 443, TargetPort: 8443, Publish: PublishIngress, PublishedPort: 443}}})
	moved := def
	moved.Plan, moved.Services, moved.Endpoints = otherPlan, moveServices(def.Services), moveEndpoints(def.Endpoints)
	got = svcText(moved)
	check("anchor legion/svc on n3", svcText(def), got)
	for _, want := range []string{"nat pass on wg0 inet from ! 10.42.0.0/16 to 10.42.0.0/16 -> (wg0)", "to 10.43.0.5 port 80", "10.42.3.17"} {
		if !strings.Contains(got, want) {
			t.Errorf("legion/svc lacks %q", want)
		}
	}
	stale := moved
	stale.Services = def.Services
	if _, err := RenderServices(stale); err == nil || !strings.Contains(err.Error(), "10.43.0.0/16") {
		t.Errorf("a VIP of the default range must be refused naming the plan's service range, got %v", err)
	}
	stale = moved
	stale.Endpoints = def.Endpoints
	if _, err := RenderServices(stale); err == nil || !strings.Contains(err.Error(), "10.42.0.0/16") {
		t.Errorf("an endpoint of the default range must be refused naming the plan's pod range, got %v", err)
	}

	// legion/policy: guards, VIP checks, the pod range on the mesh, tables.
	polText := func(st PolicyState) string {
		an, err := RenderPolicy(st)
		if err != nil {
			t.Fatal(err)
		}
		return an.Text()
	}
	pdef := policyLab()
	pmoved := pdef
	pmoved.Plan, pmoved.Services, pmoved.Endpoints = otherPlan, moveServices(pdef.Services), moveEndpoints(pdef.Endpoints)
	pmoved.Pods = append([]Pod(nil), pdef.Pods...)
	for i := range pmoved.Pods {
		pmoved.Pods[i].Addr = moveAddr(pmoved.Pods[i].Addr)
	}
	pstale := pmoved
	pstale.Services = pdef.Services
	if _, err := RenderPolicy(pstale); err == nil || !strings.Contains(err.Error(), "10.43.0.0/16") {
		t.Errorf("a VIP of the default range must be refused naming the plan's service range, got %v", err)
	}
	got = polText(pmoved)
	check("anchor legion/policy on n3", polText(pdef), got)
	for _, want := range []string{"block drop in quick on wg0 inet from 10.42.0.0/16 to 10.42.3.0/24", "to 10.43.0.0/16", "to fd00:10:43::/96"} {
		if !strings.Contains(got, want) {
			t.Errorf("legion/policy lacks %q", want)
		}
	}
	golden(t, "other_plan", d.String())
}

// The appliers keep what they rendered per plan: the same services under
// another plan are rendered again, not taken from the memo.
func TestAppliersRenderAgainForAnotherPlan(t *testing.T) {
	t.Parallel()
	st := oneNodeState()
	st.Services, st.Endpoints = nil, nil
	moved := st
	moved.Plan = otherPlan
	if sameServices(&st, &moved) {
		t.Error("services under two plans must not share rendered rules")
	}
	ps, pm := policyLab(), policyLab()
	pm.Plan = otherPlan
	if policyRulesKey(&ps) == policyRulesKey(&pm) {
		t.Error("policy rules under two plans must not share a fingerprint")
	}
}

// A task leaving its table but still running (not ready, draining) keeps
// its connections in both families under any plan: its IPv6 twin is
// found in the cluster's ranges, so nothing is looked up or killed.
func TestNotReadyKeepsStatesInAnotherPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	st.Plan, st.Services, st.Endpoints = otherPlan, moveServices(st.Services), moveEndpoints(st.Endpoints)
	applyThenReset(t, f, pf, &st)
	st.Endpoints[1].Ready = false
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "pfctl -s states") || strings.HasPrefix(l, "pfctl -k") {
			t.Errorf("a task still running had its states looked up or killed: %q", f.Lines())
		}
	}
	if len(f.Lines()) == 0 {
		t.Error("the not-ready task's table was not replaced")
	}
}
