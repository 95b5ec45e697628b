package legion

// NetworkPolicy allows traffic to (ingress) and from (egress) the services
// of its namespace it selects, beyond the namespace's isolation.
type NetworkPolicy struct {
	Header
	Spec NetworkPolicySpec `json:"spec"`
}

// NetworkPolicySpec selects services by labels and lists what is allowed.
type NetworkPolicySpec struct {
	Services map[string]string `json:"services,omitempty"` // label selector; empty: every service
	Ingress  []IngressRule     `json:"ingress,omitempty"`
	// Egress, when given, limits what the selected tasks send; an empty
	// list allows nothing beyond DNS. Unset limits nothing.
	Egress *[]EgressRule `json:"egress,omitempty"`
}

// IngressRule lets peers in on ports.
type IngressRule struct {
	From  []Peer       `json:"from,omitempty"`  // none: every task
	Ports []PolicyPort `json:"ports,omitempty"` // none: every port
}

// EgressRule lets the selected tasks send to peers or networks on ports.
type EgressRule struct {
	To    []EgressPeer `json:"to,omitempty"` // none: anywhere
	Ports []PolicyPort `json:"ports,omitempty"`
}

// Peer is a set of tasks: a namespace's services by labels.
type Peer struct {
	Namespace string            `json:"namespace,omitempty"` // default: the policy's own
	Services  map[string]string `json:"services,omitempty"`  // default: every service
}

// EgressPeer is a set of tasks, or an IPv4 network.
type EgressPeer struct {
	Namespace string            `json:"namespace,omitempty"`
	Services  map[string]string `json:"services,omitempty"`
	CIDR      string            `json:"cidr,omitempty"`
}

// PolicyPort is a destination port of the tasks (never a VIP's).
type PolicyPort struct {
	Protocol Protocol `json:"protocol"`
	Port     int      `json:"port"`
}
