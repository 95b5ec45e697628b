package metrics

import (
	"testing"

	"github.com/legionbsd/legion"
	"github.com/prometheus/client_golang/prometheus"
)

func task(ns, owner string, state legion.TaskState, restarts int) legion.Object {
	t := &legion.Task{}
	t.Metadata.Namespace, t.Metadata.Name = ns, owner+"-x"
	t.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: owner}
	t.Status.State, t.Status.Restarts = state, restarts
	return t
}

// total adds the samples of d whose labels start with prefix.
func total(ss []sample, d *prometheus.Desc, prefix ...string) (float64, int) {
	var v float64
	n := 0
	for _, s := range ss {
		if s.desc != d {
			continue
		}
		ok := true
		for i, p := range prefix {
			ok = ok && s.labels[i] == p
		}
		if ok {
			v += s.value
			n++
		}
	}
	return v, n
}

// Tasks by state add up to the tasks; restarts count the tasks not ended;
// nodes go by state and availability; quotas put limit beside use.
func TestClusterMetricsCountEachThingOnce(t *testing.T) {
	t.Parallel()
	cpu, tasks, objects := legion.CPU(1500), 4, 20
	ns := &legion.Namespace{Spec: legion.NamespaceSpec{Quota: &legion.Quota{CPU: &cpu, Tasks: &tasks, Objects: &objects}},
		Status: legion.NamespaceStatus{Used: &legion.QuotaUsage{CPU: 500, Tasks: 2, Objects: 7}}}
	ns.Metadata.Name = "shop"
	node := func(st legion.NodeState, av legion.Availability) legion.Object {
		n := &legion.Node{}
		n.Status.State, n.Spec.Availability = st, av
		return n
	}
	by := map[legion.Kind][]legion.Object{
		legion.KindTask: {task("shop", "web", legion.TaskRunning, 2), task("shop", "web", legion.TaskRunning, 1),
			task("shop", "web", legion.TaskFailed, 7), task("default", "db", legion.TaskPending, 0)},
		legion.KindNode:      {node(legion.NodeReady, legion.AvailabilityActive), node(legion.NodeReady, legion.AvailabilityDrain), node(legion.NodeDown, "")},
		legion.KindNamespace: {ns},
	}
	got := clusterMetrics(by)
	if v, _ := total(got, descTasks); v != 4 {
		t.Errorf("tasks by state add up to %v, want 4", v)
	}
	if v, _ := total(got, descTasks, "shop", "running"); v != 2 {
		t.Errorf("running tasks of shop = %v, want 2", v)
	}
	if v, _ := total(got, descObjects, "Task"); v != 4 {
		t.Errorf("Task objects = %v, want 4", v)
	}
	if v, n := total(got, descRestarts, "shop", "Service", "web"); v != 3 || n != 1 {
		t.Errorf("restarts of web = %v in %d samples, want 3 (the failed task's left out) in 1", v, n)
	}
	if v, _ := total(got, descNodes, "ready"); v != 2 {
		t.Errorf("ready nodes = %v, want 2", v)
	}
	if v, _ := total(got, descNodes, "down", "active"); v != 1 {
		t.Errorf("down active nodes = %v, want 1 (no availability is active)", v)
	}
	if v, _ := total(got, descQuota, "shop", "cpu"); v != 1.5 {
		t.Errorf("shop's cpu limit = %v, want 1.5 cores", v)
	}
	if v, _ := total(got, descQuotaUsed, "shop", "tasks"); v != 2 {
		t.Errorf("shop's tasks used = %v, want 2", v)
	}
	if l, _ := total(got, descQuota, "shop", "objects"); l != 20 {
		t.Errorf("shop's objects limit = %v, want 20", l)
	}
	if v, _ := total(got, descQuotaUsed, "shop", "objects"); v != 7 {
		t.Errorf("shop's objects used = %v, want 7", v)
	}
	if _, n := total(got, descQuota, "shop", "memory"); n != 0 {
		t.Errorf("a memory limit reported for a quota without one")
	}
}
