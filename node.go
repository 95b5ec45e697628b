package legion

// Node is a machine of the cluster. Its labels (metadata.labels) are what
// placement constraints and preferences read.
type Node struct {
	Header
	Spec   NodeSpec   `json:"spec"`
	Status NodeStatus `json:"status,omitzero"`
}

// NodeRole is whether a node also runs a manager.
type NodeRole string

// Node roles.
const (
	RoleManager NodeRole = "manager"
	RoleWorker  NodeRole = "worker"
)

// Availability is what the operator allows on a node.
type Availability string

// Availabilities.
const (
	AvailabilityActive Availability = "active"
	AvailabilityPause  Availability = "pause"
	AvailabilityDrain  Availability = "drain"
)

// TaintEffect is what a taint does to tasks that do not tolerate it.
type TaintEffect string

// Taint effects.
const (
	NoSchedule       TaintEffect = "NoSchedule"
	PreferNoSchedule TaintEffect = "PreferNoSchedule"
	NoExecute        TaintEffect = "NoExecute"
)

// Taint keeps tasks that do not tolerate it off a node.
type Taint struct {
	Key    string      `json:"key"`
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
}

// String writes the taint as kubectl does: key[=value]:effect.
func (t Taint) String() string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}

// NodeSpec is what the operator sets on a node.
type NodeSpec struct {
	Role         NodeRole     `json:"role"`
	Availability Availability `json:"availability"`
	Taints       []Taint      `json:"taints,omitempty"`
}

// NodeState is what the leader knows of a node's health.
type NodeState string

// Node states.
const (
	NodeUnknown NodeState = "unknown"
	NodeReady   NodeState = "ready"
	NodeSuspect NodeState = "suspect" // three heartbeats missed: out of endpoints, no new tasks
	NodeDown    NodeState = "down"    // eight missed: its tasks are orphaned
)

// InEndpoints reports whether the ready tasks of a node in this state
// belong in the services' endpoints: not once it is suspect, so that other
// nodes stop sending them new connections while nothing is replaced yet,
// nor down.
func (s NodeState) InEndpoints() bool { return s != NodeSuspect && s != NodeDown }

// Platform is what a node runs, or what an image offered.
type Platform struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Linux    bool   `json:"linux,omitempty"`    // runs Linux images (--linux)
	NoLimits bool   `json:"noLimits,omitempty"` // kern.racct.enable is off: no rctl limits
}

// NodeResources are a node's capacity and what tasks may be given of it.
type NodeResources struct {
	Capacity    ResourceRequests `json:"capacity"`
	Allocatable ResourceRequests `json:"allocatable"`
}

// WireGuard is a node's mesh identity.
type WireGuard struct {
	PublicKey string `json:"publicKey"`
	Endpoint  string `json:"endpoint,omitempty"`
}

// DrainState is where a drain stands.
type DrainState string

// Drain states.
const (
	DrainDraining  DrainState = "draining"
	DrainBlocked   DrainState = "blocked"
	DrainCompleted DrainState = "completed"
)

// DrainStatus is what is left of a drain, each thing with its reason.
type DrainStatus struct {
	State     DrainState  `json:"state"`
	Remaining []DrainItem `json:"remaining,omitempty"`
}

// DrainItem is a task or Volume still holding a drain up.
type DrainItem struct {
	Kind   Kind   `json:"kind"` // Task or Volume
	Name   string `json:"name"` // namespace/name
	Reason string `json:"reason"`
}

// How a node runs pods (NodeStatus.Runtime).
const (
	NodeRuntimeJails   = "jails"
	NodeRuntimeProcess = "process"
)

// NodeStatus is what the node reports and the leader decides about it.
type NodeStatus struct {
	State     NodeState     `json:"state,omitempty"`
	Hostname  string        `json:"hostname,omitempty"`
	Addr      string        `json:"addr,omitempty"`
	Platform  Platform      `json:"platform,omitzero"`
	Resources NodeResources `json:"resources,omitzero"`
	PodCIDR   string        `json:"podCidr,omitempty"`
	WireGuard *WireGuard    `json:"wireguard,omitempty"`
	Drain     *DrainStatus  `json:"drain,omitempty"`
	Protocol  int           `json:"protocol,omitempty"`
	ImagePins bool          `json:"imagePins,omitempty"`
	Version   string        `json:"version,omitempty"`
	Message   string        `json:"message,omitempty"`
	// Runtime is how the node runs pods: NodeRuntimeJails or
	// NodeRuntimeProcess; empty from nodes older than the field.
	Runtime string `json:"runtime,omitempty"`
	// ZFSRoot is the dataset a jails node keeps images and containers
	// under, found at start; a jails node reporting none is refused (D7).
	ZFSRoot string `json:"zfsRoot,omitempty"`
	// Ingress is where the node's proxy serves Routes; nil when it serves
	// none (or the node is older than the field).
	Ingress *NodeIngress `json:"ingress,omitempty"`
	// PublishErrors are the published ports the node cannot serve, with
	// why, in port order: on the process platform a published port is a
	// listener of the node's own, which another process of the host may
	// hold. The node reports them as they change.
	PublishErrors []PortError `json:"publishErrors,omitempty"`
	// MemoryPressure: the node's available memory is below its agent's
	// eviction threshold. Its agent evicts tasks that request no memory,
	// and the scheduler places no new one there (a global service's
	// aside) until the pressure is over.
	MemoryPressure bool `json:"memoryPressure,omitempty"`
}

// PortError is a port a node cannot serve, and why.
type PortError struct {
	Port  int    `json:"port"`
	Error string `json:"error"`
}

// NodeIngress is where a node serves Routes, as its daemon was told to
// listen (--ingress-listen, --ingress-tls-listen); empty: not that way.
type NodeIngress struct {
	HTTP  string `json:"http,omitempty"`
	HTTPS string `json:"https,omitempty"`
}
