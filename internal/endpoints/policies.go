package endpoints

import (
	"sort"

	"github.com/legionbsd/legion"
)

// Policies is what every node enforces network policy from (5.6): the
// namespaces' isolation modes other than the default, every
// NetworkPolicy, and every running task with an address, so that tasks
// on other nodes (Jobs' and not-ready ones included) are known members
// of their namespace and services.
type Policies struct {
	Isolation map[string]legion.Isolation `json:"isolation,omitempty"`
	Policies  []Policy                    `json:"policies,omitempty"`
	// Members are in chunks: an agent keeps a cluster's 20,000 of them
	// and hands a new list over at each change (see MemberList).
	Members MemberList `json:"members,omitzero"`
}

// Policy is a NetworkPolicy of a namespace.
type Policy struct {
	Namespace string                   `json:"namespace"`
	Name      string                   `json:"name"`
	Spec      legion.NetworkPolicySpec `json:"spec"`
}

// Member is a running task with an address: a Service's (Service named)
// or a Job's.
type Member struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service,omitempty"`
	Task      string `json:"task"`
	IP        string `json:"ip"`
	Node      string `json:"node"`
}

// Running reports whether a task is a member: running, with an address,
// told to stop or not. A stopping task stays one until it has stopped, so
// that nodes keep its connections' states through its drain (5.4).
func Running(t *legion.Task) bool {
	return t.Status.State == legion.TaskRunning && t.Status.IP != ""
}

// ComputePolicies gathers the policy state in a stable order.
func ComputePolicies(namespaces []*legion.Namespace, policies []*legion.NetworkPolicy, tasks []*legion.Task) Policies {
	var out Policies
	for _, ns := range namespaces {
		if m := ns.Spec.Isolation; m != "" && m != legion.IsolationNamespace {
			if out.Isolation == nil {
				out.Isolation = map[string]legion.Isolation{}
			}
			out.Isolation[ns.Metadata.Name] = m
		}
	}
	for _, p := range policies {
		out.Policies = append(out.Policies, Policy{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, Spec: p.Spec})
	}
	sort.Slice(out.Policies, func(i, j int) bool {
		a, b := out.Policies[i], out.Policies[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	var members []*Member
	for _, t := range tasks {
		if !Running(t) {
			continue
		}
		m := Member{Namespace: t.Metadata.Namespace, Task: t.Metadata.Name, IP: t.Status.IP, Node: t.Spec.Node}
		if t.Spec.Owner.Kind == legion.KindService {
			m.Service = t.Spec.Owner.Name
		}
		members = append(members, &m)
	}
	sort.Slice(members, func(i, j int) bool {
		a, b := members[i], members[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Task < b.Task
	})
	out.Members = MembersOf(members)
	return out
}
