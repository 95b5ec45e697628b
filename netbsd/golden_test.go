package netbsd

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	goldenfile "github.com/legionbsd/legion/internal/golden"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// golden compares got with testdata/name.golden (or rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name+".golden"), got)
}

// transcript renders recorded commands, each input line prefixed with "| ".
func transcript(calls []sys.Cmd) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString(c.String())
		b.WriteByte('\n')
		if len(c.Stdin) > 0 {
			for _, l := range strings.Split(strings.TrimRight(string(c.Stdin), "\n"), "\n") {
				b.WriteString("| " + l + "\n")
			}
		}
	}
	return b.String()
}

// doc builds a golden document of titled sections.
type doc struct{ b strings.Builder }

func (d *doc) section(title, body string) {
	d.b.WriteString("=== " + title + "\n")
	d.b.WriteString(body)
	if body != "" && !strings.HasSuffix(body, "\n") {
		d.b.WriteByte('\n')
	}
}

func (d *doc) String() string { return d.b.String() }

// missingTables answers `pfctl -T show` for tables as on a host where they
// do not exist (lab fact: "Table does not exist", to be read as empty).
func missingTables(f *sys.Fake, anchor string, tables ...string) *sys.Fake {
	for _, t := range tables {
		f.On("pfctl -a "+anchor+" -t "+t+" -T show", sys.Answer{Code: 1, Stderr: "pfctl: Table does not exist.\n"})
	}
	return f
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// Fixtures: three nodes of a lab cluster, services in namespace shop.
func labNodes() []Node {
	return []Node{
		{Name: "n1", Subnet: 1, PublicKey: "PUB1", Endpoint: netip.MustParseAddrPort("192.0.2.1:51820")},
		{Name: "n2", Subnet: 2, PublicKey: "PUB2", Endpoint: netip.MustParseAddrPort("192.0.2.2:51820")},
		{Name: "n3", Subnet: 3, PublicKey: "PUB3", Endpoint: netip.MustParseAddrPort("192.0.2.3:51820")},
	}
}

func webService() Service {
	return Service{Namespace: "shop", Name: "web", VIP: addr("10.201.0.5"), Labels: map[string]string{"app": "web"},
		Ports: []ServicePort{
			{Name: "http", Proto: TCP, Port: 80, TargetPort: 8080},
			{Name: "metrics", Proto: TCP, Port: 9100, TargetPort: 9100},
		}}
}

func dbService() Service {
	return Service{Namespace: "shop", Name: "db", VIP: addr("10.201.0.6"), Labels: map[string]string{"app": "db"},
		Ports: []ServicePort{{Name: "pg", Proto: TCP, Port: 5432, TargetPort: 5432}}}
}

func ep(svc, uid, node, a string, ready bool) Endpoint {
	return Endpoint{Namespace: "shop", Service: svc, TaskUID: uid, Node: node, Addr: addr(a), Ready: ready}
}

// The address plan of the lab fixtures in both families, as every golden
// file uses it.
func TestAddressPlanGolden(t *testing.T) {
	t.Parallel()
	var d doc
	var b strings.Builder
	for _, n := range labNodes() {
		fmt.Fprintf(&b, "node %s: pods %s %s gateway %s %s wg0 %s/16 %s/96\n", n.Name,
			addrplan.NodeSubnet(n.Subnet), addrplan.NodeSubnet6(n.Subnet), addrplan.Gateway(n.Subnet), addrplan.MustTwin(addrplan.Gateway(n.Subnet)),
			n.Underlay(), addrplan.MustTwin(n.Underlay()))
	}
	d.section("nodes", b.String())
	b.Reset()
	for _, a := range []string{"10.200.3.17", "10.200.3.18", "10.200.3.19", "10.200.1.20", "10.200.3.254"} {
		fmt.Fprintf(&b, "pod %s = %s\n", a, addrplan.MustTwin(addr(a)))
	}
	for _, a := range []string{"10.201.0.5", "10.201.0.6", "10.201.1.10", "10.201.255.254"} {
		fmt.Fprintf(&b, "vip %s = %s\n", a, addrplan.MustTwin(addr(a)))
	}
	d.section("twins", b.String())
	golden(t, "address_plan", d.String())
}
