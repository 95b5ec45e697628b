package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitTolerations refuses a namespace user's Service, Job or CronJob
// that tolerates a taint its stored version did not, unless one of its
// Namespace's spec.security.tolerations covers it. A cluster admin taints
// nodes to keep them for some workloads (dedicated=shop:NoSchedule); were
// any user free to tolerate that, any team could run beside the shop's
// tasks and data. A PreferNoSchedule toleration only ranks nodes, so it
// needs nothing, and the admin's workloads tolerate what they like.
func admitTolerations(st *store.Store, a *admission) ([]string, error) {
	if !a.user {
		return nil, nil
	}
	var errs []string
	for _, c := range a.changed {
		tols, field := tolerationsOf(c.obj)
		if len(tols) == 0 {
			continue
		}
		var had []legion.Toleration
		if old := a.current[legion.ObjectKey(c.obj)]; old != nil {
			had, _ = tolerationsOf(old)
		}
		ns := c.obj.GetMetadata().Namespace
		sec, err := a.security(st, ns)
		if err != nil {
			return nil, err
		}
		for i, t := range tols {
			if t.Effect == legion.PreferNoSchedule || slices.Contains(had, t) || slices.ContainsFunc(sec.Tolerations, func(g legion.Toleration) bool { return g.Covers(t) }) {
				continue
			}
			errs = append(errs, fmt.Sprintf("%s %s: %s[%d]: %s would run it on nodes tainted for others: "+
				"namespace %s's users may tolerate a taint once Namespace %s lists it in spec.security.tolerations, which a cluster admin may add",
				c.obj.GetKind(), legion.DisplayName(c.obj), field, i, t, ns, ns))
		}
	}
	return errs, nil
}

// admitVolumeNodes refuses a namespace user's Volume put on a node that
// is tainted for others: its spec.node new or changed, or, made by a
// restore, its data's node, where that node has a NoSchedule or
// NoExecute taint the Namespace's spec.security.tolerations do not cover.
// Its data would take the disk of a node the namespace's tasks may not
// run on, as admitTolerations keeps its tasks off it.
func admitVolumeNodes(st *store.Store, a *admission) ([]string, error) {
	if !a.user {
		return nil, nil
	}
	var errs []string
	for _, c := range a.changed {
		v, ok := c.obj.(*legion.Volume)
		if !ok {
			continue
		}
		old, _ := a.current[legion.ObjectKey(v)].(*legion.Volume)
		node, field := v.Spec.Node, "spec.node"
		if node == "" && old == nil {
			node, field = v.Status.Node, "the restore's node"
		}
		if node == "" || old != nil && old.Spec.Node == node {
			continue
		}
		o, _, err := st.Get(legion.KindNode, "", node)
		if errors.Is(err, store.ErrNotFound) {
			continue // no node to take data; where it goes is the planner's
		}
		if err != nil {
			return nil, err
		}
		ns := v.Metadata.Namespace
		sec, err := a.security(st, ns)
		if err != nil {
			return nil, err
		}
		for _, t := range o.(*legion.Node).Spec.Taints {
			if t.Effect == legion.PreferNoSchedule || slices.ContainsFunc(sec.Tolerations, func(g legion.Toleration) bool { return g.Covers(legion.Toleration(t)) }) {
				continue
			}
			errs = append(errs, fmt.Sprintf("Volume %s: %s: node %s is tainted %s for others: "+
				"namespace %s's users may keep data there once Namespace %s lists the taint in spec.security.tolerations, which a cluster admin may add",
				legion.DisplayName(v), field, node, t, ns, ns))
		}
	}
	return errs, nil
}

// tolerationsOf is a workload's tolerations and the field that holds them.
func tolerationsOf(o legion.Object) ([]legion.Toleration, string) {
	switch o := o.(type) {
	case *legion.Service:
		return o.Spec.Placement.Tolerations, "spec.placement.tolerations"
	case *legion.Job:
		return o.Spec.Placement.Tolerations, "spec.placement.tolerations"
	case *legion.CronJob:
		return o.Spec.Job.Placement.Tolerations, "spec.job.placement.tolerations"
	}
	return nil, ""
}
