package dispatcher

import (
	"sort"

	"github.com/legionbsd/legion"
)

// volumeIndex is every Volume of a replica at one version, with the ones
// each node holds or that move from or to it: read once and shared by
// every node's stream until a Volume changes, so a change elsewhere costs
// no scan of the Volumes per node.
type volumeIndex struct {
	at     uint64
	byKey  map[string]*legion.Volume // namespace/name; read-only once made
	byNode map[string][]string       // keys bound to, or moving from or to, the node
}

// indexVolumes indexes Volumes read at version at.
func indexVolumes(vols []*legion.Volume, at uint64) *volumeIndex {
	ix := &volumeIndex{at: at, byKey: make(map[string]*legion.Volume, len(vols)), byNode: map[string][]string{}}
	for _, v := range vols {
		k := volumeKey(v.Metadata.Namespace, v.Metadata.Name)
		ix.byKey[k] = v
		nodes := []string{v.Status.Node}
		if m := v.Status.Migration; m != nil {
			nodes = append(nodes, m.From, m.To)
		}
		seen := map[string]bool{"": true}
		for _, n := range nodes {
			if !seen[n] {
				seen[n] = true
				ix.byNode[n] = append(ix.byNode[n], k)
			}
		}
	}
	return ix
}

func volumeKey(namespace, name string) string { return namespace + "/" + name }

// forNode lists the Volumes node's tasks mount and those it holds or that
// move from or to it, in namespace and name order. A mounted Volume that
// does not exist is left out: the agent fails the task that needs it.
func (ix *volumeIndex) forNode(node string, uses []taskUses) []*legion.Volume {
	keys := map[string]bool{}
	for _, k := range ix.byNode[node] {
		keys[k] = true
	}
	for _, u := range uses {
		for _, name := range u.volumes {
			if k := volumeKey(u.namespace, name); ix.byKey[k] != nil {
				keys[k] = true
			}
		}
	}
	out := make([]*legion.Volume, 0, len(keys))
	for k := range keys {
		out = append(out, ix.byKey[k])
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Metadata, out[j].Metadata
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out
}
