package daemon

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// A jails node of a cluster initialised with its own ranges opens its
// network in them: legion0's gateway and the resolver at 10.42.n.1, the
// pod range routed into wg0, pods addressed and gatewayed in the node's
// /24, VIPs of the service range in legion/svc, the plan's ranges in
// legion/policy and on the mesh; nothing of the default ranges anywhere.
func TestOpenPlatformJailsOtherPlan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	f := freshHost()
	o := jailsOptions(t, dir, f)
	p, err := openPlatform(ctx, o, "/usr/local/bin/legion", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	plan := addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}
	nc := networkConfig{plan: plan, subnet: 4, node: "n1", zone: filepath.Join(dir, "zone.json"), keyDir: filepath.Join(dir, "pki")}
	if err := p.openNetwork(ctx, o, nc, quietLog()); err != nil {
		t.Fatalf("a jails node must open its network in the cluster's ranges: %v", err)
	}
	nw, ok := p.network.(*PFNetwork)
	if !ok {
		t.Fatalf("jails platform network is %T, want *PFNetwork", p.network)
	}
	if p.dnsListen != "10.42.4.1:53" || nw.Nameserver() != "10.42.4.1" {
		t.Errorf("DNS at %q, nameserver %q; want the plan's gateway 10.42.4.1", p.dnsListen, nw.Nameserver())
	}
	for _, want := range []string{"ifconfig legion0 inet 10.42.4.1/24", "ifconfig legion0 inet6 fd00:10:42:4::1/64",
		"route -n add -net 10.42.0.0/16 -interface wg0", "route -n add -inet6 -net fd00:10:42::/48 -interface wg0"} {
		if indexOf(f.Lines(), want) < 0 {
			t.Errorf("node set-up did not run %q: %q", want, f.Lines())
		}
	}

	task := podTask("00000000-0000-4000-8000-000000000011", "shop", "web")
	ip, err := nw.Attach(ctx, task)
	if err != nil || ip != "10.42.4.2" {
		t.Fatalf("Attach = %q, %v; want the first pod address of 10.42.4.0/24", ip, err)
	}
	f.On("ifconfig lp000000000011 ", sys.Answer{})
	f.On("ifconfig lp000000000011", sys.Answer{Code: 1, Stderr: strings.ReplaceAll(labNoIface, "%s", "lp000000000011")})
	if err := nw.Join(ctx, task, ip, false); err != nil {
		t.Fatal(err)
	}
	uid := task.Metadata.UID
	for _, want := range []string{"ifconfig -j " + uid + " epair4b inet 10.42.4.2/24", "route -j " + uid + " add default 10.42.4.1",
		"route -j " + uid + " add -inet6 default fd00:10:42:4::1"} {
		if indexOf(f.Lines(), want) < 0 {
			t.Errorf("join did not run %q: %q", want, f.Lines())
		}
	}

	nw.Apply(ctx, []*endpoints.Service{{Namespace: "shop", Name: "web", VIP: "10.43.0.1", Labels: map[string]string{"app": "web"},
		Ports: []endpoints.Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 8080}},
		Tasks: []*endpoints.Task{{Name: "web-1", IP: ip, Node: "n1", Slot: 1}}}}, nil)
	nw.ApplyPeers(ctx, []endpoints.Peer{{Name: "n2", PodCIDR: "10.42.5.0/24", PublicKey: "KEY2", Endpoint: "192.0.2.5:51820"}})
	svc, pol := lastStdin(f, "pfctl -a legion/svc -f -"), lastStdin(f, "pfctl -a legion/policy -f -")
	for what, wants := range map[string][]string{
		svc: {"to 10.43.0.1 port 80", "nat pass on wg0 inet from ! 10.42.0.0/16 to 10.42.0.0/16"},
		pol: {"lp000000000011", "block drop in quick on lp000000000011 inet to 10.43.0.0/16", "block drop in quick on wg0 inet from 10.42.0.0/16 to 10.42.4.0/24"},
	} {
		for _, want := range wants {
			if !strings.Contains(what, want) {
				t.Errorf("anchor lacks %q:\n%s", want, what)
			}
		}
	}
	var peer string
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "wg set wg0 peer KEY2") {
			peer = l
		}
	}
	if !strings.Contains(peer, "10.42.5.0/24") || !strings.Contains(peer, "fd00:10:42:5::/64") {
		t.Errorf("peer n2 must route its /24 of the plan, got %q (all: %q)", peer, f.Lines())
	}
	all := strings.Join(f.Lines(), "\n") + svc + pol
	for _, old := range []string{"10.200.", "10.201.", "fd00:10:200:", "fd00:10:201:"} {
		if strings.Contains(all, old) {
			t.Errorf("the node still uses the default range %q:\n%s", old, all)
		}
	}
}
