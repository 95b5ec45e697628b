package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// quotaExcess names what usage after an apply takes beyond the quota and
// beyond what before took: only growth is refused, so a namespace whose
// quota was lowered under what it runs may still shrink or stay.
func quotaExcess(q *legion.Quota, before, after legion.QuotaUsage) []string {
	if q == nil {
		return nil
	}
	var out []string
	if q.CPU != nil && after.CPU > *q.CPU && after.CPU > before.CPU {
		out = append(out, "cpu "+after.CPU.String()+" of "+q.CPU.String())
	}
	if q.Memory != nil && after.Memory > *q.Memory && after.Memory > before.Memory {
		out = append(out, "memory "+after.Memory.String()+" of "+q.Memory.String())
	}
	if q.Tasks != nil && after.Tasks > *q.Tasks && after.Tasks > before.Tasks {
		out = append(out, "tasks "+strconv.Itoa(after.Tasks)+" of "+strconv.Itoa(*q.Tasks))
	}
	if q.Volumes != nil && after.Volumes > *q.Volumes && after.Volumes > before.Volumes {
		out = append(out, "volumes "+strconv.Itoa(after.Volumes)+" of "+strconv.Itoa(*q.Volumes))
	}
	if q.Storage != nil && after.Storage > *q.Storage && after.Storage > before.Storage {
		out = append(out, "storage "+after.Storage.String()+" of "+q.Storage.String())
	}
	return out
}

// unsizedUnderQuota refuses what does not say what it needs under a quota
// that counts it: a Service whose pod requests no CPU (or memory) under a
// CPU (memory) quota, a ZFS Volume or claim without a size under a
// storage quota.
func unsizedUnderQuota(obj legion.Object, q *legion.Quota) []string {
	if q == nil {
		return nil
	}
	ns := obj.GetMetadata().Namespace
	var out []string
	switch o := obj.(type) {
	case *legion.Service:
		req := o.Spec.Pod.Requests()
		if q.CPU != nil && req.CPU == 0 {
			out = append(out, fmt.Sprintf("spec.pod: requests no cpu, which namespace %s's cpu quota (%s) requires", ns, q.CPU))
		}
		if q.Memory != nil && req.Memory == 0 {
			out = append(out, fmt.Sprintf("spec.pod: requests no memory, which namespace %s's memory quota (%s) requires", ns, q.Memory))
		}
		if q.Storage != nil {
			for i, pv := range o.Spec.Pod.Volumes {
				if pv.Claim != nil && pv.Claim.Size == 0 {
					out = append(out, fmt.Sprintf("spec.pod.volumes[%d].claim.size: missing, which namespace %s's storage quota (%s) requires", i, ns, q.Storage))
				}
			}
		}
	case *legion.Volume:
		if q.Storage != nil && o.Spec.Driver == legion.DriverZFS && o.Spec.Size == 0 {
			out = append(out, fmt.Sprintf("spec.size: missing, which namespace %s's storage quota (%s) requires", ns, q.Storage))
		}
	}
	return out
}

// admitQuotas holds the namespaces of the apply's changed Services and
// Volumes to their quotas: what they would want in all after the apply
// (scheduler.Demand) against what they want now. The Namespaces of the
// apply itself count with their new quotas.
func admitQuotas(st *store.Store, a *admission) ([]string, error) {
	touched := map[string]bool{}
	for _, c := range a.changed {
		switch c.obj.(type) {
		case *legion.Service, *legion.Volume:
			touched[c.obj.GetMetadata().Namespace] = true
		}
	}
	var errs []string
	var nodes []*legion.Node
	nodesRead := false
	for _, ns := range slices.Sorted(maps.Keys(touched)) {
		nsObj, err := a.namespace(st, ns)
		if err != nil {
			return nil, err
		}
		if nsObj == nil || nsObj.Spec.Quota == nil {
			continue
		}
		q := nsObj.Spec.Quota
		var what []string
		for _, c := range a.changed {
			if c.obj.GetMetadata().Namespace != ns {
				continue
			}
			for _, e := range unsizedUnderQuota(c.obj, q) {
				errs = append(errs, fmt.Sprintf("%s %s: %s", c.obj.GetKind(), legion.DisplayName(c.obj), e))
			}
			if _, ok := c.obj.(*legion.Namespace); !ok {
				what = append(what, string(c.obj.GetKind())+" "+c.obj.GetMetadata().Name)
			}
		}
		before, err := listState(st, ns)
		if err != nil {
			return nil, err
		}
		if !nodesRead && hasGlobal(before.Services, a.items) {
			if nodes, err = listKind[*legion.Node](st, legion.KindNode, ""); err != nil {
				return nil, err
			}
			nodesRead = true
		}
		before.Nodes = nodes
		after := overlay(before, a.items, ns)
		over := quotaExcess(q, scheduler.Demand(ns, &before), scheduler.Demand(ns, &after))
		if len(over) > 0 {
			counted := "replicas × requests of its services"
			if as := autoscaledMax(after.Services); as != "" {
				counted += ", autoscaled ones at their autoscale.max, which they may scale to (" + as + ")"
			}
			if slices.ContainsFunc(after.Services, func(s *legion.Service) bool { return scheduler.UpdateSurge(s, 1) > 0 }) {
				counted += ", and one task more for each that updates start-first, running a new task beside the old one"
			}
			errs = append(errs, fmt.Sprintf("over the quota of namespace %s: %s, applying %s (%s; its volumes and claims)",
				ns, strings.Join(over, ", "), strings.Join(what, ", "), counted))
		}
	}
	return errs, nil
}

// autoscaledMax names the autoscaled services with the replicas their
// autoscale.max counts for (scheduler.Demand), as "web: 10, api: 4".
func autoscaledMax(svcs []*legion.Service) string {
	var out []string
	for _, s := range svcs {
		if a := s.Spec.Autoscale; a != nil {
			out = append(out, s.Metadata.Name+": "+strconv.Itoa(a.Max))
		}
	}
	return strings.Join(out, ", ")
}

// listState reads namespace ns's Services and Volumes.
func listState(st *store.Store, ns string) (scheduler.State, error) {
	var s scheduler.State
	var err error
	if s.Services, err = listKind[*legion.Service](st, legion.KindService, ns); err != nil {
		return s, err
	}
	s.Volumes, err = listKind[*legion.Volume](st, legion.KindVolume, ns)
	return s, err
}

// overlay is before with the apply's Services and Volumes of namespace ns
// put in place of the stored ones; a Service keeps its stored status, as
// apply does.
func overlay(before scheduler.State, items []applyItem, ns string) scheduler.State {
	after := scheduler.State{Nodes: before.Nodes}
	svcs := map[string]*legion.Service{}
	var svcOrder []string
	for _, s := range before.Services {
		svcs[s.Metadata.Name] = s
		svcOrder = append(svcOrder, s.Metadata.Name)
	}
	vols := map[string]*legion.Volume{}
	var volOrder []string
	for _, v := range before.Volumes {
		vols[v.Metadata.Name] = v
		volOrder = append(volOrder, v.Metadata.Name)
	}
	for _, it := range items {
		if it.obj.GetMetadata().Namespace != ns {
			continue
		}
		switch o := it.obj.(type) {
		case *legion.Service:
			n := *o
			if cur := svcs[o.Metadata.Name]; cur != nil {
				n.Status = cur.Status
			} else {
				svcOrder = append(svcOrder, o.Metadata.Name)
			}
			svcs[o.Metadata.Name] = &n
		case *legion.Volume:
			if vols[o.Metadata.Name] == nil {
				volOrder = append(volOrder, o.Metadata.Name)
			}
			vols[o.Metadata.Name] = o
		}
	}
	for _, name := range svcOrder {
		after.Services = append(after.Services, svcs[name])
	}
	for _, name := range volOrder {
		after.Volumes = append(after.Volumes, vols[name])
	}
	return after
}

func hasGlobal(stored []*legion.Service, items []applyItem) bool {
	for _, s := range stored {
		if s.Spec.Mode == legion.ModeGlobal {
			return true
		}
	}
	for _, it := range items {
		if s, ok := it.obj.(*legion.Service); ok && s.Spec.Mode == legion.ModeGlobal {
			return true
		}
	}
	return false
}
