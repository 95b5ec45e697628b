package legion

import (
	"fmt"
	"slices"
	"strings"
)

// Namespace scopes names, DNS, quotas, RBAC and network isolation. It is
// cluster-scoped and set by the cluster admin only.
type Namespace struct {
	Header
	Spec   NamespaceSpec   `json:"spec"`
	Status NamespaceStatus `json:"status,omitzero"`
}

// Isolation is which tasks may reach a namespace's tasks by default.
type Isolation string

// Isolation modes.
const (
	IsolationNamespace Isolation = "namespace" // the namespace's own tasks
	IsolationOpen      Isolation = "open"      // every task
	IsolationLocked    Isolation = "locked"    // none, not even its own
)

// NamespaceSpec is what the admin sets on a namespace.
type NamespaceSpec struct {
	Isolation Isolation         `json:"isolation"`
	Quota     *Quota            `json:"quota,omitempty"`
	Security  NamespaceSecurity `json:"security"`
}

// Quota bounds what a namespace's workloads may ask for; an unset field
// is no bound.
type Quota struct {
	CPU     *CPU   `json:"cpu,omitempty"`
	Memory  *Bytes `json:"memory,omitempty"`
	Tasks   *int   `json:"tasks,omitempty"`
	Volumes *int   `json:"volumes,omitempty"`
	Storage *Bytes `json:"storage,omitempty"`
	// Objects bounds how many objects of every kind but Task the
	// namespace holds (each at most MaxObjectSize), so its users cannot
	// fill the managers' store. Applies count against it; what the
	// planner makes for the namespace (claims' Volumes, a CronJob's
	// Jobs) counts too, but is not held back by it.
	Objects *int `json:"objects,omitempty"`
}

// ObjectQuotaKinds are the kinds a quota's objects bound counts: every
// namespaced kind but Task, whose number the tasks bound holds.
func ObjectQuotaKinds() []Kind {
	var out []Kind
	for _, k := range Kinds() {
		if k.Namespaced() && k != KindTask {
			out = append(out, k)
		}
	}
	return out
}

// NamespaceSecurity lists what the namespace's containers may loosen:
// rawSockets, chflags, mlock, sysvipc, securelevel (a level below 2),
// enforceStatfs (1) and hostPath (pod volumes on the node's own paths);
// and publish, what its users (not the cluster admin) need to publish a
// port.
type NamespaceSecurity struct {
	Allow []string `json:"allow,omitempty"`
	// Tolerations are the taints its users' workloads may tolerate, as a
	// workload's toleration matches them: nodes tainted for a team stay
	// that team's. The cluster admin's workloads may tolerate any.
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// NamespaceStatus is what the namespace uses of its quota.
type NamespaceStatus struct {
	Used *QuotaUsage `json:"used,omitempty"`
}

// QuotaUsage is the amounts a quota is checked against.
type QuotaUsage struct {
	CPU     CPU   `json:"cpu"`
	Memory  Bytes `json:"memory"`
	Tasks   int   `json:"tasks"`
	Volumes int   `json:"volumes"`
	Storage Bytes `json:"storage"`
	// Objects is counted only under an objects bound, as of the
	// planner's last pass (a few seconds behind what applies add).
	Objects int `json:"objects,omitempty"`
}

// SecurityExcess is one loosening a container asks for that its
// namespace's allow-list does not give: the container's field and the
// allow-list entry it would need.
type SecurityExcess struct {
	Field   string // e.g. spec.pod.containers[0].security.securelevel
	Setting string // the allow-list name: rawSockets, ..., securelevel, enforceStatfs
}

// Excess lists what the pod's containers loosen beyond the allow-list,
// their fields under path (e.g. "spec.pod"). An admitted pod has its
// defaults written out; unset levels count as the defaults.
func (s NamespaceSecurity) Excess(pod *PodSpec, path string) []SecurityExcess {
	var out []SecurityExcess
	// The container's path is made only for what it asks beyond the
	// list: the planner asks of every task it places.
	check := func(list string, i int, c *Container) {
		cp := func() string { return fmt.Sprintf("%s.%s[%d]", path, list, i) }
		for _, a := range c.Security.Allow {
			if !slices.Contains(s.Allow, a) {
				out = append(out, SecurityExcess{Field: cp() + ".security.allow", Setting: a})
			}
		}
		if l := c.Security.Securelevel; l != nil && *l < 2 && !slices.Contains(s.Allow, AllowSecurelevel) {
			out = append(out, SecurityExcess{Field: cp() + ".security.securelevel", Setting: AllowSecurelevel})
		}
		if e := c.Security.EnforceStatfs; e != nil && *e < 2 && !slices.Contains(s.Allow, AllowEnforceStatfs) {
			out = append(out, SecurityExcess{Field: cp() + ".security.enforceStatfs", Setting: AllowEnforceStatfs})
		}
	}
	for i, v := range pod.Volumes {
		if v.HostPath != nil && !slices.Contains(s.Allow, AllowHostPath) {
			out = append(out, SecurityExcess{Field: fmt.Sprintf("%s.volumes[%d].hostPath", path, i), Setting: AllowHostPath})
		}
	}
	for i := range pod.InitContainers {
		check("initContainers", i, &pod.InitContainers[i])
	}
	for i := range pod.Containers {
		check("containers", i, &pod.Containers[i])
	}
	return out
}

// ExcessMessage says in one line what the pod asks for beyond namespace
// ns's allow-list, or "" when nothing.
func (s NamespaceSecurity) ExcessMessage(ns string, pod *PodSpec, path string) string {
	ex := s.Excess(pod, path)
	if len(ex) == 0 {
		return ""
	}
	parts := make([]string, len(ex))
	for i, e := range ex {
		parts[i] = e.Field + ": " + e.Setting
	}
	allowed := "nothing"
	if len(s.Allow) > 0 {
		allowed = strings.Join(s.Allow, ", ")
	}
	return fmt.Sprintf("not allowed in namespace %s (its spec.security.allow: %s): %s; a cluster admin may add them to the Namespace's spec.security.allow", ns, allowed, strings.Join(parts, "; "))
}
