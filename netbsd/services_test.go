package netbsd

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// shopPF is a PF on a fake whose two service tables are not loaded yet,
// and the one-node state of the shop's services.
func shopPF() (*sys.Fake, *PF, ServiceState) {
	f := missingTables(sys.NewFake(), AnchorServices, "svc_shop_db", "svc_shop_web")
	return f, &PF{R: f, Log: quiet()}, oneNodeState()
}

// applyThenReset applies st and forgets the commands it ran, so that a
// test sees only those of its next change.
func applyThenReset(t *testing.T, f *sys.Fake, pf *PF, st *ServiceState) {
	t.Helper()
	if _, err := pf.ApplyServices(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	f.Reset()
}

func oneNodeState() ServiceState {
	return ServiceState{
		Node:     labNodes()[2],
		ExtIf:    "em0",
		Services: []Service{webService(), dbService()},
		Endpoints: []Endpoint{
			ep("web", "0000000000000000000000000000a017", "n3", "10.200.3.17", true),
			ep("web", "0000000000000000000000000000a018", "n3", "10.200.3.18", true),
			ep("db", "0000000000000000000000000000a019", "n3", "10.200.3.19", true),
		},
	}
}

// A first apply after start reads the tables the previous agent left
// (missing ones are empty, lab fact) and loads the whole anchor.
func TestOneNodeTwoServicesGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	plan, err := pf.ApplyServices(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.RulesChanged {
		t.Fatal("a first apply must load the rules")
	}
	if d := cmp.Diff([]string{"svc_shop_db", "svc_shop_web"}, plan.TablesChanged); d != "" {
		t.Errorf("tables changed (-want +got):\n%s", d)
	}
	an, err := RenderServices(st)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	d.section("anchor "+an.Path, an.Text())
	d.section("commands", transcript(f.Calls()))
	golden(t, "one_node_two_services", d.String())
}

func TestThreeNodeMeshGolden(t *testing.T) {
	t.Parallel()
	nodes := labNodes()
	st := ServiceState{
		Node: nodes[0], ExtIf: "em0",
		Services: []Service{webService()},
		Endpoints: []Endpoint{
			ep("web", "0000000000000000000000000000b001", "n1", "10.200.1.2", true),
			ep("web", "0000000000000000000000000000b002", "n2", "10.200.2.2", true),
			ep("web", "0000000000000000000000000000b003", "n3", "10.200.3.2", true),
		},
	}
	var d doc
	for _, self := range nodes {
		st.Node = self
		an, err := RenderServices(st)
		if err != nil {
			t.Fatal(err)
		}
		d.section("anchor "+an.Path+" on "+self.Name, an.Text())
		cmds, _ := PlanPeers(addrplan.Plan{}, self.Name, nil, nodes, nil)
		var lines []string
		for _, c := range cmds {
			lines = append(lines, sys.Command("wg", c...).String())
		}
		d.section("wg peers of "+self.Name+" from none", strings.Join(lines, "\n"))
	}
	golden(t, "three_node_mesh", d.String())
}

func TestPublishedPortsGolden(t *testing.T) {
	t.Parallel()
	web := webService()
	web.Ports[0].Publish, web.Ports[0].PublishedPort = PublishIngress, 30080
	api := Service{Namespace: "shop", Name: "api", VIP: addr("10.201.0.7"), Labels: map[string]string{"app": "api"},
		Ports: []ServicePort{{Name: "https", Proto: TCP, Port: 443, TargetPort: 8443, Publish: PublishHost, PublishedPort: 443}}}
	dns := Service{Namespace: "shop", Name: "dns", Labels: map[string]string{"app": "dns"}, // dnsrr: no VIP
		Ports: []ServicePort{{Name: "dns", Proto: UDP, Port: 53, TargetPort: 5353, Publish: PublishIngress, PublishedPort: 53}}}
	st := ServiceState{
		Node: labNodes()[0], ExtIf: "vtnet0",
		Services: []Service{web, api, dns},
		Endpoints: []Endpoint{
			ep("web", "0000000000000000000000000000c001", "n2", "10.200.2.5", true),
			ep("api", "0000000000000000000000000000c002", "n1", "10.200.1.6", true),
			ep("api", "0000000000000000000000000000c003", "n2", "10.200.2.6", true), // not local: not in svl_
			ep("dns", "0000000000000000000000000000c004", "n3", "10.200.3.7", true),
		},
	}
	an, err := RenderServices(st)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	d.section("anchor "+an.Path+" on n1 (ingress and host publishing)", an.Text())
	golden(t, "published_ports", d.String())

	local := map[string][]netip.Addr{}
	for _, tb := range an.Tables {
		local[tb.Name] = tb.Addrs
	}
	want := []netip.Addr{addr("10.200.1.6"), addr("fd00:10:200:1::6")}
	if dd := cmp.Diff(want, local["svl_shop_api"], cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); dd != "" {
		t.Errorf("publish: host must forward to local tasks only (-want +got):\n%s", dd)
	}

	dup := st
	other := dbService()
	other.Ports[0].Publish, other.Ports[0].PublishedPort = PublishIngress, 30080
	dup.Services = append(dup.Services, other)
	if _, err := RenderServices(dup); err == nil || !strings.Contains(err.Error(), "published port tcp/30080") {
		t.Errorf("a published port used twice must be refused, got %v", err)
	}
}

// A readiness change replaces one table and reloads no rule; a task gone
// from the endpoints has its translated states killed by key.
func TestReadinessChangeGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	st.Endpoints = append(st.Endpoints, ep("web", "0000000000000000000000000000a020", "n1", "10.200.1.20", true))
	applyThenReset(t, f, pf, &st)
	var d doc

	st.Endpoints[1].Ready = false
	plan, err := pf.ApplyServices(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if plan.RulesChanged {
		t.Error("a readiness change must not reload rules")
	}
	if d := cmp.Diff([]string{"svc_shop_web"}, plan.TablesChanged); d != "" {
		t.Errorf("tables changed (-want +got):\n%s", d)
	}
	d.section("10.200.3.18 not ready: commands", transcript(f.Calls()))
	for _, c := range f.Calls() {
		if strings.Contains(c.String(), " -f -") || strings.Contains(c.String(), "-s states") {
			t.Errorf("readiness change ran %q", c)
		}
	}

	f.Reset()
	f.On("pfctl -s states", sys.Answer{Stdout: strings.Join([]string{
		"all tcp 10.200.1.20:8080 (10.201.0.5:80) <- 10.200.3.40:41234       ESTABLISHED:ESTABLISHED",
		"all tcp fd00:10:200:1::14[8080] (fd00:10:201::5[80]) <- fd00:10:200:3::28[41236]       ESTABLISHED:ESTABLISHED",
		"all tcp 100.64.3.1:61000 (198.51.100.9:5555) -> 10.200.1.20:8080       ESTABLISHED:ESTABLISHED",
		"all tcp 10.200.3.17:8080 (10.201.0.5:80) <- 10.200.3.41:41240       ESTABLISHED:ESTABLISHED",
		"all tcp 10.200.3.40:41250 -> 10.200.1.20:8080       ESTABLISHED:ESTABLISHED",
		"",
	}, "\n")})
	st.Endpoints = st.Endpoints[:3] // 10.200.1.20's task is gone
	plan, err = pf.ApplyServices(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if plan.RulesChanged {
		t.Error("a gone endpoint must not reload rules")
	}
	d.section("10.200.1.20 gone: commands", transcript(f.Calls()))
	golden(t, "readiness_change", d.String())
	want := []string{
		"pfctl -k key -k tcp 10.201.0.5:80 <- 10.200.3.40:41234",
		"pfctl -k key -k tcp fd00:10:201::5[80] <- fd00:10:200:3::28[41236]",
		"pfctl -k key -k tcp 100.64.3.1:61000 -> 10.200.1.20:8080",
	}
	var kills []string
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "pfctl -k") {
			kills = append(kills, l)
		}
	}
	if d := cmp.Diff(want, kills); d != "" {
		t.Errorf("killed states (-want +got):\n%s", d)
	}
}

// webStates is `pfctl -s states` with a connection through web's VIP to
// each of 10.200.3.17 and 10.200.3.18.
var webStates = sys.Answer{Stdout: strings.Join([]string{
	"all tcp 10.200.3.17:8080 (10.201.0.5:80) <- 10.200.1.40:41234       ESTABLISHED:ESTABLISHED",
	"all tcp 10.200.3.18:8080 (10.201.0.5:80) <- 10.200.1.41:41240       ESTABLISHED:ESTABLISHED",
	"all tcp fd00:10:200:3::12[8080] (fd00:10:201::5[80]) <- fd00:10:200:1::29[41242]       ESTABLISHED:ESTABLISHED",
	"",
}, "\n")}

// stateLines is the commands that listed or killed states.
func stateLines(f *sys.Fake) []string {
	var out []string
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "pfctl -s states") || strings.HasPrefix(l, "pfctl -k") {
			out = append(out, l)
		}
	}
	return out
}

// A task that left its table while still running (not ready, draining)
// keeps its states; once it is gone, which changes no table, they are
// killed in both families.
func TestSparedBackendKilledOnceGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	f.On("pfctl -s states", webStates)
	applyThenReset(t, f, pf, &st)

	st.Endpoints[1].Ready = false
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	st.Endpoints[1].Ready, st.Endpoints[1].Draining = true, true // the same to pf
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	replaced := slices.ContainsFunc(f.Lines(), func(l string) bool { return strings.HasPrefix(l, "pfctl -a legion/svc -t svc_shop_web -T replace") })
	if got := stateLines(f); len(got) != 0 || !replaced {
		t.Fatalf("a task still running must leave its table and keep its states: %q", f.Lines())
	}

	f.Reset()
	st.Endpoints = slices.Delete(st.Endpoints, 1, 2)
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pfctl -s states",
		"pfctl -k key -k tcp 10.201.0.5:80 <- 10.200.1.41:41240",
		"pfctl -k key -k tcp fd00:10:201::5[80] <- fd00:10:200:1::29[41242]",
	}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Errorf("the task gone after leaving its table (-want +got):\n%s", d)
	}

	f.Reset()
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if got := stateLines(f); len(got) != 0 {
		t.Errorf("a backend's states killed once must be forgotten: %q", got)
	}
}

// After a restart, whom the agent before spared is not known: a task out
// of its table when the endpoints arrive has its states killed once gone.
func TestSparedBeforeRestartKilledOnceGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := missingTables(sys.NewFake(), AnchorServices, "svc_shop_db").
		On("pfctl -a legion/svc -t svc_shop_web -T show", sys.Answer{Stdout: "   10.200.3.17\n   fd00:10:200:3::11\n"}).
		On("pfctl -s states", webStates)
	pf, st := &PF{R: f, Log: quiet()}, oneNodeState()
	st.Endpoints[1].Ready = false // left its table before the restart
	applyThenReset(t, f, pf, &st)

	st.Endpoints = slices.Delete(st.Endpoints, 1, 2)
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pfctl -s states",
		"pfctl -k key -k tcp 10.201.0.5:80 <- 10.200.1.41:41240",
		"pfctl -k key -k tcp fd00:10:201::5[80] <- fd00:10:200:1::29[41242]",
	}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// An agent restarted before the endpoints arrive leaves the loaded anchor.
func TestRestartLeavesAnchorUntilEndpoints(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	pf := &PF{R: f, Log: quiet()}
	plan, err := pf.ApplyServices(context.Background(), nil)
	if err != nil || plan.RulesChanged || len(f.Calls()) != 0 {
		t.Fatalf("nil state must touch nothing: plan %+v err %v calls %q", plan, err, f.Lines())
	}
	if _, err := pf.ApplyPolicy(context.Background(), nil); err != nil || len(f.Calls()) != 0 {
		t.Fatalf("nil policy state must touch nothing: %v %q", err, f.Lines())
	}
}

// A service change reloads the rules with the tables' current contents and
// drops the tables no rule uses any more.
func TestServiceRemovedReloadsAndKillsTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	applyThenReset(t, f, pf, &st)
	st.Services = st.Services[:1]
	plan, err := pf.ApplyServices(ctx, &st)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.RulesChanged {
		t.Fatal("removing a service must reload the rules")
	}
	lines := f.Lines()
	if len(lines) < 2 || lines[0] != "pfctl -a legion/svc -f -" || lines[1] != "pfctl -a legion/svc -t svc_shop_db -T kill" {
		t.Fatalf("commands %q", lines)
	}
	if !strings.Contains(string(f.Calls()[0].Stdin), "table <svc_shop_web> persist { 10.200.3.17 10.200.3.18 fd00:10:200:3::11 fd00:10:200:3::12 }") {
		t.Errorf("reload must carry the table contents:\n%s", f.Calls()[0].Stdin)
	}
}

func TestTableNames(t *testing.T) {
	t.Parallel()
	long := tableName("svc_", "a-very-long-namespace", "with-a-very-long-service-name")
	if len(long) > maxTableName || !strings.HasPrefix(long, "svc_a-very-long") {
		t.Errorf("long name %q (%d chars)", long, len(long))
	}
	if a, b := tableName("svc_", "a-very-long-namespace", "with-a-very-long-service-name-1"), tableName("svc_", "a-very-long-namespace", "with-a-very-long-service-name-2"); a == b {
		t.Errorf("distinct services share table %q", a)
	}
	if got := ServiceTable(webService()); got != "svc_shop_web" {
		t.Errorf("got %q", got)
	}
}

func TestDrainFor(t *testing.T) {
	t.Parallel()
	if DrainFor(true, true) != SoftDrain || DrainFor(true, false) != 0 || DrainFor(false, true) != 0 {
		t.Error("only a ready Service task drains")
	}
}

// A service deleted with its tasks: its table goes and its backends'
// states are killed.
func TestDeletedServiceKillsItsStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pf, st := shopPF()
	applyThenReset(t, f, pf, &st)
	f.On("pfctl -s states", sys.Answer{Stdout: "all tcp 10.200.3.19:5432 (10.201.0.6:5432) <- 10.200.3.17:40000       ESTABLISHED:ESTABLISHED\n"})
	st.Services, st.Endpoints = st.Services[:1], st.Endpoints[:2]
	if _, err := pf.ApplyServices(ctx, &st); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pfctl -a legion/svc -f -",
		"pfctl -a legion/svc -t svc_shop_db -T kill",
		"pfctl -s states",
		"pfctl -k key -k tcp 10.201.0.6:5432 <- 10.200.3.17:40000",
	}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
