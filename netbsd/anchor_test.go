package netbsd

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

func TestPlanAnchor(t *testing.T) {
	t.Parallel()
	a, b := addr("10.200.1.2"), addr("10.200.1.3")
	next := Anchor{Path: "legion/svc", Rules: "R\n", Tables: []Table{{Name: "t1", Addrs: []netip.Addr{a, b}}, {Name: "t2"}}}
	for _, c := range []struct {
		name    string
		prev    *Loaded
		rules   bool
		changed []string
		lines   []string
	}{
		{"unknown after restart", nil, true, []string{"t1", "t2"}, []string{"pfctl -a legion/svc -f -"}},
		{"nothing changed", &Loaded{Rules: "R\n", Tables: map[string][]netip.Addr{"t1": {a, b}, "t2": nil}}, false, nil, nil},
		{"a member left, a table emptied", &Loaded{Rules: "R\n", Tables: map[string][]netip.Addr{"t1": {a}, "t2": {b}}}, false, []string{"t1", "t2"},
			[]string{"pfctl -a legion/svc -t t1 -T replace 10.200.1.2 10.200.1.3", "pfctl -a legion/svc -t t2 -T replace"}},
		{"rules changed, a table gone", &Loaded{Rules: "old\n", Tables: map[string][]netip.Addr{"t1": {a, b}, "t0": {a}}}, true, nil,
			[]string{"pfctl -a legion/svc -f -", "pfctl -a legion/svc -t t0 -T kill"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PlanAnchor(c.prev, next)
			var lines []string
			for _, cmd := range p.Cmds {
				lines = append(lines, cmd.String())
			}
			if d := cmp.Diff(struct {
				R bool
				C []string
				L []string
			}{c.rules, c.changed, c.lines}, struct {
				R bool
				C []string
				L []string
			}{p.RulesChanged, p.TablesChanged, lines}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// An empty table is given as { }: pf.conf(5) leaves a table
			// that exists and is defined without a list as it was, so a
			// reload would keep the addresses it should drop.
			if p.RulesChanged && string(p.Cmds[0].Stdin) != "table <t1> persist { 10.200.1.2 10.200.1.3 }\ntable <t2> persist { }\nR\n" {
				t.Errorf("stdin %q", p.Cmds[0].Stdin)
			}
		})
	}
}

// A table read after a restart: addresses one a line; a missing table is
// empty (pfctl: "Table does not exist").
func TestShowTable(t *testing.T) {
	t.Parallel()
	f := sys.NewFake().
		On("pfctl -a legion/svc -t svc_shop_web -T show", sys.Answer{Stdout: "   10.200.3.17\n   fd00:10:200:3::11\n   10.200.1.2\n"}).
		On("pfctl -a legion/svc -t svc_gone -T show", sys.Answer{Code: 1, Stderr: "pfctl: Table does not exist.\n"}).
		On("pfctl -a legion/svc -t svc_bad -T show", sys.Answer{Stdout: "   what\n"})
	pf := &PF{R: f, Log: quiet()}
	got, err := pf.showTable(context.Background(), "legion/svc", "svc_shop_web")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]netip.Addr{addr("10.200.1.2"), addr("10.200.3.17"), addr("fd00:10:200:3::11")}, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got, err := pf.showTable(context.Background(), "legion/svc", "svc_gone"); err != nil || got != nil {
		t.Errorf("missing table: %v %v", got, err)
	}
	if _, err := pf.showTable(context.Background(), "legion/svc", "svc_bad"); err == nil {
		t.Error("garbage must be refused")
	}
}

func TestPlanStateKills(t *testing.T) {
	t.Parallel()
	out := `all tcp 10.200.1.20:8080 (10.201.0.5:80) <- 10.200.3.40:41234       ESTABLISHED:ESTABLISHED
all udp 10.200.1.20:5353 (10.201.0.7:53) <- 10.200.3.40:5000       MULTIPLE:SINGLE
em0 tcp 10.200.1.20:8080 (192.0.2.1:30080) <- 198.51.100.7:6000       ESTABLISHED:ESTABLISHED
all icmp 10.200.3.40:12 -> 10.200.1.20:12       0:0
all tcp 10.200.3.1:4000 (10.200.3.40:41000) -> 10.200.3.9:8080       ESTABLISHED:ESTABLISHED
`
	got, err := PlanStateKills(out, map[netip.Addr]bool{addr("10.200.1.20"): true})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"-k", "key", "-k", "tcp 10.201.0.5:80 <- 10.200.3.40:41234"},
		{"-k", "key", "-k", "udp 10.201.0.7:53 <- 10.200.3.40:5000"},
		{"-k", "key", "-k", "tcp 192.0.2.1:30080 <- 198.51.100.7:6000"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := PlanStateKills("all tcp 10.0.0.1:1 10.0.0.2:2 X\n", map[netip.Addr]bool{addr("10.0.0.2"): true}); err == nil {
		t.Error("a line without a direction must be refused")
	}
	if got, err := PlanStateKills("garbage", nil); err != nil || got != nil {
		t.Errorf("nothing dead: nothing listed or parsed, got %v %v", got, err)
	}
}
