package legion

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
}

// NamespaceSecurity lists what the namespace's containers may loosen:
// rawSockets, chflags, mlock, sysvipc, securelevel (a level below 2) and
// enforceStatfs (1).
type NamespaceSecurity struct {
	Allow []string `json:"allow,omitempty"`
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
}
