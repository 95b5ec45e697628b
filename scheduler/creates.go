package scheduler

import (
	"cmp"
	"slices"
)

// MaxCreatesPerPass bounds the tasks one pass makes, so a service of
// tens of thousands of replicas grows by steps of a few Raft appends
// (raft's batch is 512 entries) instead of flooding the store in one
// plan; the loop plans again as soon as those writes land. Each step
// costs a plan over every task the store holds, the slots' history
// included, and a pass that hits the bound plans twice (Plan): at 512, a
// rolling update of 20,000 tasks over one rollout's history took 42
// passes and 4.0-4.6 s of the planner's CPU, at 2,048 12 passes and
// 1.4-1.6 s (BenchmarkRollout20000).
const MaxCreatesPerPass = 2048

// mayCreate says whether the owner may make one more task this run, and
// counts what it wanted. Without caps (the first run) owners are served
// first come up to the bound; what they wanted decides whether a second
// run shares the bound out fairly (Plan). An owner refused is planned
// again at once.
func (p *planner) mayCreate(o *owner) bool {
	if p.demand == nil {
		p.demand = map[ownerKey]int{}
	}
	wanted := p.demand[o.key]
	if wanted < MaxCreatesPerPass {
		p.demand[o.key] = wanted + 1
	}
	allowed := p.created < MaxCreatesPerPass
	if p.caps != nil {
		allowed = o.created < p.caps[o.key]
	}
	if !allowed {
		p.wake(p.now)
		return false
	}
	o.created++
	p.created++
	return true
}

// fairShares splits limit between the owners' demands, max-min fair: no
// owner gets more than it wants, and what the small ones leave goes in
// equal parts to the others. Ties go in owner order.
func fairShares(demand map[ownerKey]int, limit int) map[ownerKey]int {
	keys := make([]ownerKey, 0, len(demand))
	for k := range demand {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ownerKey) int {
		if c := cmp.Compare(demand[a], demand[b]); c != 0 {
			return c
		}
		return compareKeys(a, b)
	})
	shares := make(map[ownerKey]int, len(keys))
	left := limit
	for i, k := range keys {
		// Spread the remainder over the first owners, so the shares add up
		// to the limit when the demands allow.
		rest := len(keys) - i
		share := left / rest
		if left%rest != 0 {
			share++
		}
		share = min(share, demand[k])
		shares[k] = share
		left -= share
	}
	return shares
}

func compareKeys(a, b ownerKey) int {
	if c := cmp.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

func sum(m map[ownerKey]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
