package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"pgregory.net/rapid"
)

// pickLinear chooses the best node for a task of the owner among its
// candidates, or -1. Nodes are ranked by: no untolerated PreferNoSchedule
// taint, then the spread preferences level by level, then not where the
// slot just failed to start, then fewest tasks of the owner, then least
// requested, then preferred (anti-)affinity, then name. The integer keys
// are compared first and a node that already loses is not looked at
// further, so most nodes cost a few loads and compares.
func (p *planner) pickLinear(o *owner, volNode string, avoid map[string]bool) int {
	best := -1
	var bPrefer, bFailed bool
	var bSpread [8]int32
	var bCount, bAff int32
	var bLoad float64
	levels := min(len(o.spread), len(bSpread))
	for _, i := range o.candidates {
		st := &o.static[i]
		// better: 1 when this node wins on a key, -1 when it loses, 0 while tied.
		better := 0
		if best >= 0 && st.preferNo != bPrefer {
			if st.preferNo {
				continue
			}
			better = 1
		}
		var spread [8]int32
		for l := 0; l < levels; l++ {
			sl := &o.spread[l]
			spread[l] = sl.counts[sl.group[i]]
			if better == 0 && best >= 0 {
				if spread[l] > bSpread[l] {
					better = -1
					break
				}
				if spread[l] < bSpread[l] {
					better = 1
				}
			}
		}
		if better < 0 {
			continue
		}
		failed := avoid != nil && avoid[p.nodes[i].name]
		if better == 0 && best >= 0 {
			if failed && !bFailed {
				continue
			}
			if !failed && bFailed {
				better = 1
			}
		}
		count := o.nodeCount[i]
		if better == 0 && best >= 0 {
			if count > bCount {
				continue
			}
			if count < bCount {
				better = 1
			}
		}
		load := p.load(o, i)
		if better == 0 && best >= 0 {
			if load > bLoad {
				continue
			}
			if load < bLoad {
				better = 1
			}
		}
		var aff int32
		if len(o.antiPref)+len(o.affPref) > 0 {
			for _, a := range o.antiPref {
				aff += a.nodeCount[i]
			}
			for _, a := range o.affPref {
				aff -= a.nodeCount[i]
			}
			if better == 0 && best >= 0 {
				if aff > bAff {
					continue
				}
				if aff < bAff {
					better = 1
				}
			}
		}
		if best >= 0 && better <= 0 {
			continue // a full tie: the earlier name stays
		}
		if !p.fits(o, i, volNode) {
			continue
		}
		best, bPrefer, bSpread, bCount, bFailed, bLoad, bAff = i, st.preferNo, spread, count, failed, load, aff
	}
	return best
}

// TestPickMatchesLinearScan checks the grouped node choice against the
// plain scan over every candidate, on random nodes and placement
// preferences, task after task.
func TestPickMatchesLinearScan(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		st := State{Heartbeats: map[string]time.Time{}, LeaderSince: now.Add(-time.Hour)}
		nodes := rapid.IntRange(1, 24).Draw(t, "nodes")
		for i := 0; i < nodes; i++ {
			n := &legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{
				Name: fmt.Sprintf("n%02d", i), Labels: map[string]string{}}}}
			for _, k := range []string{"zone", "rack"} {
				if v := rapid.IntRange(0, 3).Draw(t, k); v > 0 {
					n.Metadata.Labels[k] = fmt.Sprint(v)
				}
			}
			if rapid.IntRange(0, 4).Draw(t, "prefer") == 0 {
				n.Spec.Taints = []legion.Taint{{Key: "spot", Effect: legion.PreferNoSchedule}}
			}
			n.Status.State = legion.NodeReady
			cpu := legion.CPU(rapid.SampledFrom([]int{1000, 2000, 4000}).Draw(t, "cpu"))
			n.Status.Resources.Allocatable = legion.ResourceRequests{CPU: cpu, Memory: 8 << 30}
			st.Nodes = append(st.Nodes, n)
			st.Heartbeats[n.Metadata.Name] = now
		}
		replicas := 1
		svc := &legion.Service{Header: legion.Header{Kind: legion.KindService, Metadata: legion.Metadata{Name: "s", Namespace: "default"}}}
		svc.Spec.Replicas = &replicas
		svc.Spec.Pod.Containers = []legion.Container{{Name: "c", Image: "i",
			Resources: legion.Resources{Requests: legion.ResourceRequests{CPU: legion.CPU(rapid.SampledFrom([]int{0, 250, 600}).Draw(t, "req"))}}}}
		for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"zone", "rack"}), 0, 2, rapid.ID[string]).Draw(t, "spread") {
			svc.Spec.Placement.Preferences = append(svc.Spec.Placement.Preferences, legion.Preference{Spread: "node.labels." + k})
		}
		st.Services = []*legion.Service{svc}
		p := newPlanner(&st, now)
		p.nodeHealth()
		p.indexTasks()
		o := p.owners[ownerKey{legion.KindService, "default", "s"}]
		p.prepare(o)
		var avoid map[string]bool
		if rapid.Bool().Draw(t, "avoid") {
			avoid = map[string]bool{fmt.Sprintf("n%02d", rapid.IntRange(0, nodes-1).Draw(t, "avoidNode")): true}
		}
		for k := 1; k <= 40; k++ {
			got, want := p.pick(o, "", avoid), p.pickLinear(o, "", avoid)
			if got != want {
				t.Fatalf("task %d: grouped pick chose %d, the linear scan %d", k, got, want)
			}
			if got < 0 {
				return
			}
			e := p.newTask(o, p.slotOf(o, k))
			e.t.Spec.Node, e.t.Spec.Placed, e.node, e.st = p.nodes[got].name, p.nowPtr, got, legion.TaskAssigned
			p.take(e, got)
		}
	})
}
