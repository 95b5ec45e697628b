package netbsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/legionbsd/legion/sys"
)

// PF applies the rendered anchors through the system runner. It remembers
// what it loaded, so readiness changes become table updates; after an
// agent restart it knows nothing and reloads once the state has arrived.
type PF struct {
	R      sys.Runner
	Log    *slog.Logger
	Guards *Guards // told which pods the loaded policy guards; may be nil

	mu      sync.Mutex
	mainOK  bool // pf was seen enabled with a main ruleset calling legion/*
	loaded  map[string]*Loaded
	svcMemo *serviceMemo
	polMemo *policyMemo
	// spared is the backends (both families) that left a service table
	// while their task was still listed, not ready or draining: their
	// states were kept, so they are killed once the task is gone, which
	// changes no table.
	spared map[netip.Addr]bool
}

// policyMemo is the last rendered policy rules and the fingerprint of what
// they were rendered from.
type policyMemo struct {
	key   [32]byte
	rules string
	sets  map[string]peerSet
}

// serviceMemo is the last rendered service rules and the services they
// came from (copied: the caller may change its slices).
type serviceMemo struct {
	state ServiceState
	rules serviceRules
}

func cloneServices(in []Service) []Service {
	out := make([]Service, len(in))
	for i, s := range in {
		s.Ports = slices.Clone(s.Ports)
		out[i] = s
	}
	return out
}

func (p *PF) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// ApplyServices brings legion/svc to st. A nil st means the endpoints have
// not arrived since the agent started: the anchor the previous agent loaded
// stays, as loading it against no endpoints would drop every VIP and
// published port while the pods behind them run on. Backends gone from the
// endpoints have their states killed, those that left their table earlier
// (not ready, draining) too.
func (p *PF) ApplyServices(ctx context.Context, st *ServiceState) (AnchorPlan, error) {
	if st == nil {
		return AnchorPlan{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The rules depend on the services alone: an endpoint change reuses
	// them and computes only the tables.
	if p.svcMemo == nil || !sameServices(&p.svcMemo.state, st) {
		r, err := renderServiceRules(*st)
		if err != nil {
			return AnchorPlan{}, err
		}
		memo := &serviceMemo{rules: r, state: ServiceState{Node: st.Node, Plan: st.Plan, ExtIf: st.ExtIf, Services: cloneServices(st.Services)}}
		p.svcMemo = memo
	}
	tables, err := p.svcMemo.rules.fill(*st)
	if err != nil {
		return AnchorPlan{}, err
	}
	an := Anchor{Path: AnchorServices, Rules: p.svcMemo.rules.rules, Tables: tables}
	prev := p.loaded[an.Path]
	before := map[string][]netip.Addr(nil)
	if prev != nil {
		before = prev.Tables
	} else {
		// Unknown after a restart: what is in the tables now tells which
		// backends went away meanwhile.
		before = make(map[string][]netip.Addr, len(an.Tables))
		for _, t := range an.Tables {
			addrs, err := p.showTable(ctx, an.Path, t.Name)
			if err != nil {
				return AnchorPlan{}, err
			}
			before[t.Name] = addrs
		}
	}
	plan, err := p.apply(ctx, prev, an)
	if err != nil {
		return plan, err
	}
	// A dead backend left a table, now or while spared: only the leavers
	// of changed or removed tables and the spared are candidates, and
	// those still among the endpoints (not ready, draining) keep their
	// states to finish.
	now := make(map[string][]netip.Addr, len(plan.TablesChanged))
	for _, t := range an.Tables {
		now[t.Name] = t.Addrs
	}
	changed := make(map[string]bool, len(plan.TablesChanged))
	for _, name := range plan.TablesChanged {
		changed[name] = true
	}
	dead := maps.Clone(p.spared)
	if dead == nil {
		dead = make(map[netip.Addr]bool)
	}
	if prev == nil {
		// Whom the agent before spared is not known: any task out of its
		// table may have states.
		for _, e := range st.Endpoints {
			if e.Service != "" && !e.InTable() {
				dead[e.Addr] = true
				if t, ok := st.Plan.Twin(e.Addr); ok {
					dead[t] = true
				}
			}
		}
	}
	for name, addrs := range before {
		if _, kept := now[name]; kept && !changed[name] {
			continue
		}
		for _, a := range addrs {
			if _, still := slices.BinarySearchFunc(now[name], a, netip.Addr.Compare); !still {
				dead[a] = true
			}
		}
	}
	spared := make(map[netip.Addr]bool)
	if len(dead) > 0 {
		listed := make(map[netip.Addr]bool, len(dead))
		for _, e := range st.Endpoints {
			if !dead[e.Addr] {
				continue
			}
			addrs := []netip.Addr{e.Addr}
			if t, ok := st.Plan.Twin(e.Addr); ok {
				addrs = append(addrs, t)
			}
			for _, a := range addrs {
				listed[a] = true
				if !e.InTable() {
					spared[a] = true
				}
			}
		}
		for a := range listed {
			delete(dead, a)
		}
	}
	p.spared = spared
	if err := p.killStates(ctx, dead); err != nil {
		return plan, err
	}
	return plan, nil
}

// ApplyPolicy brings legion/policy to st (nil: not arrived yet, nothing is
// touched) and then records the pods it guards.
func (p *PF) ApplyPolicy(ctx context.Context, st *PolicyState) (AnchorPlan, error) {
	if st == nil {
		return AnchorPlan{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The rules do not depend on the endpoints: a membership change reuses
	// them and fills only the tables.
	key := policyRulesKey(st)
	if p.polMemo == nil || p.polMemo.key != key {
		rules, sets, err := renderPolicyRules(st)
		if err != nil {
			return AnchorPlan{}, err
		}
		p.polMemo = &policyMemo{key: key, rules: rules, sets: sets}
	}
	an := Anchor{Path: AnchorPolicy, Rules: p.polMemo.rules, Tables: policyTables(st, p.polMemo.sets)}
	plan, err := p.apply(ctx, p.loaded[an.Path], an)
	if err != nil {
		return plan, err
	}
	if p.Guards != nil {
		// An anchor pf never reaches guards nothing: pods are marked only
		// once pf is seen enabled and calling legion/* (then trusted, as
		// the node's start-up checks saw to it).
		if !p.mainOK {
			if err := CheckMain(ctx, p.R); err != nil {
				return plan, fmt.Errorf("%s loaded but its pods are not marked guarded: %w", an.Path, err)
			}
			p.mainOK = true
		}
		addrs := make([]netip.Addr, len(st.Pods))
		for i, pod := range st.Pods {
			addrs[i] = pod.Addr
		}
		p.Guards.Set(addrs)
	}
	return plan, nil
}

// apply runs an anchor's plan and records what is loaded. A failed step
// forgets the anchor, so the next pass reloads it whole.
func (p *PF) apply(ctx context.Context, prev *Loaded, an Anchor) (AnchorPlan, error) {
	plan := PlanAnchor(prev, an)
	if p.loaded == nil {
		p.loaded = make(map[string]*Loaded)
	}
	for _, c := range plan.Cmds {
		_, err := p.R.Run(ctx, c)
		if err != nil && c.Args[len(c.Args)-1] == "kill" && sys.IsExit(err, "does not exist") {
			continue
		}
		if err != nil {
			delete(p.loaded, an.Path)
			return plan, fmt.Errorf("load anchor %s: %w", an.Path, err)
		}
	}
	tables := make(map[string][]netip.Addr, len(an.Tables))
	for _, t := range an.Tables {
		tables[t.Name] = t.Addrs
	}
	p.loaded[an.Path] = &Loaded{Rules: an.Rules, Tables: tables}
	if plan.RulesChanged {
		p.log().Info("pf anchor loaded", "anchor", an.Path, "tables", len(an.Tables))
	} else if len(plan.TablesChanged) > 0 {
		p.log().Debug("pf tables replaced", "anchor", an.Path, "tables", plan.TablesChanged)
	}
	return plan, nil
}

// showTable reads a table's addresses; a missing table is empty (pfctl
// answers "Table does not exist").
func (p *PF) showTable(ctx context.Context, anchor, table string) ([]netip.Addr, error) {
	res, err := p.R.Run(ctx, sys.Command("pfctl", "-a", anchor, "-t", table, "-T", "show"))
	if sys.IsExit(err, "Table does not exist") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read table %s of %s: %w", table, anchor, err)
	}
	var addrs []netip.Addr
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		s := strings.TrimSpace(line)
		if s == "" {
			continue
		}
		pre, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("read table %s of %s: %q: expected an address", table, anchor, s)
			}
			pre = netip.PrefixFrom(a, a.BitLen())
		}
		addrs = append(addrs, pre.Addr())
	}
	return sortAddrs(addrs), nil
}

// killStates kills the states translated to dead backends, by state key.
func (p *PF) killStates(ctx context.Context, dead map[netip.Addr]bool) error {
	if len(dead) == 0 {
		return nil
	}
	res, err := p.R.Run(ctx, sys.Command("pfctl", "-s", "states"))
	if err != nil {
		return fmt.Errorf("list pf states: %w", err)
	}
	kills, err := PlanStateKills(string(res.Stdout), dead)
	if err != nil {
		return err
	}
	for _, k := range kills {
		if _, err := p.R.Run(ctx, sys.Command("pfctl", k...)); err != nil {
			return fmt.Errorf("kill state %q: %w", k[3], err)
		}
	}
	if len(kills) > 0 {
		p.log().Info("killed states of dead backends", "states", len(kills))
	}
	return nil
}

// The main ruleset must call Legion's anchors: pf.conf(5) evaluates an
// anchor's rules only where the main ruleset reaches a call of it, so
// without these lines VIPs do nothing and policy is not enforced.
var mainCalls = []struct{ show, line string }{
	{"nat", `nat-anchor "legion/*"`},
	{"nat", `rdr-anchor "legion/*"`},
	{"rules", `anchor "legion/*"`},
}

// MainRuleset is the main ruleset `--pf-main` loads on a host whose own
// does not call Legion's anchors: the calls and nothing else, so what the
// anchors do not decide passes, as with no ruleset at all.
const MainRuleset = "nat-anchor \"legion/*\"\nrdr-anchor \"legion/*\"\nanchor \"legion/*\"\n"

// PFEnabled reads the status line of `pfctl -s info`.
func PFEnabled(info string) (bool, error) {
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Status:" {
			return f[1] == "Enabled", nil
		}
	}
	return false, fmt.Errorf("pfctl -s info printed no Status line")
}

// MissingMainCalls lists the anchor calls Legion needs that the main
// ruleset lacks, given `pfctl -s nat` and `pfctl -s rules`; pfctl prints
// each call as its keyword, the quoted path and what it applies to.
func MissingMainCalls(nat, rules string) []string {
	out := map[string]string{"nat": nat, "rules": rules}
	var missing []string
	for _, c := range mainCalls {
		found := false
		for _, line := range strings.Split(out[c.show], "\n") {
			l := strings.TrimSpace(line)
			if l == c.line || strings.HasPrefix(l, c.line+" ") {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, c.line)
		}
	}
	return missing
}

// CheckMain reads whether pf is enabled and its main ruleset calls
// Legion's anchors; nil when both hold.
func CheckMain(ctx context.Context, r sys.Runner) error {
	res, err := r.Run(ctx, sys.Command("pfctl", "-s", "info"))
	if err != nil {
		return fmt.Errorf("read pf's status: %w", err)
	}
	on, err := PFEnabled(string(res.Stdout))
	if err != nil {
		return err
	}
	if !on {
		return errors.New("pf is not enabled (pfctl -s info): nothing Legion loads is applied")
	}
	var shown [2]string
	for i, what := range []string{"nat", "rules"} {
		res, err := r.Run(ctx, sys.Command("pfctl", "-s", what))
		if err != nil {
			return fmt.Errorf("read pf's main ruleset (pfctl -s %s): %w", what, err)
		}
		shown[i] = string(res.Stdout)
	}
	if m := MissingMainCalls(shown[0], shown[1]); len(m) > 0 {
		return fmt.Errorf("pf's main ruleset lacks %s: Legion's anchors are never evaluated", strings.Join(m, ", "))
	}
	return nil
}
