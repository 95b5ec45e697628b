package netbsd

import (
	"net/netip"

	"github.com/legionbsd/legion/netbsd/addrplan"
)

// Names and numbers fixed by the design.
const (
	Bridge     = "legion0" // the node's pod bridge
	WGIface    = "wg0"     // the node's WireGuard interface
	MTU        = 1420      // wg0's MTU, given to every pod interface too
	WGPort     = 51820     // WireGuard listen port
	Keepalive  = 25        // WireGuard persistent keepalive, seconds
	ServiceTag = "LSVC"    // pf tag set by every service rdr
)

// Proto is a transport protocol of a port.
type Proto string

// Protocols a port may use.
const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// Publish says how a service port is published outside the pod network.
type Publish string

// Publishing modes.
const (
	PublishNone    Publish = ""
	PublishIngress Publish = "ingress" // routing mesh: every node, every task
	PublishHost    Publish = "host"    // this node only, local tasks only, client address kept
)

// Node is one cluster node as the network sees it.
type Node struct {
	Name      string
	Subnet    int            // n of the node's pod subnet, the n-th /24 of the pod range
	PublicKey string         // WireGuard public key (base64); empty until registered
	Endpoint  netip.AddrPort // advertised WireGuard endpoint; zero when none
}

// Underlay is the node's wg0 address, 100.64.n.1.
func (n Node) Underlay() netip.Addr { return addrplan.UnderlayAddr(n.Subnet) }

// ServicePort is one port of a service.
type ServicePort struct {
	Name          string
	Proto         Proto
	Port          uint16 // the VIP's port
	TargetPort    uint16 // the tasks' port
	Publish       Publish
	PublishedPort uint16 // on the nodes' external interface
}

// Service is a load-balanced service. A zero VIP means endpoint mode dnsrr:
// no VIP rules.
type Service struct {
	Namespace string
	Name      string
	VIP       netip.Addr
	Labels    map[string]string
	Ports     []ServicePort
}

// Key is "namespace/name".
func (s Service) Key() string { return s.Namespace + "/" + s.Name }

// Endpoint is one task behind a service, or a Job's running task (Service
// empty: a member of its namespace for policy, balanced to by nothing).
//
// A task present but not ready, or draining, is out of the service's table
// while its connections finish (soft drain). A task absent from the list is
// dead: its states are killed.
type Endpoint struct {
	Namespace string
	Service   string
	TaskUID   string
	Node      string
	Addr      netip.Addr // IPv4; the twin is derived
	Ready     bool
	Draining  bool
}

// InTable reports whether new connections may be balanced to the endpoint.
func (e Endpoint) InTable() bool { return e.Ready && !e.Draining }

// Pod is a pod running on this node, as networking needs it.
type Pod struct {
	TaskUID       string
	Namespace     string
	Service       string            // empty for a Job's task
	ServiceLabels map[string]string // the service's labels; nil for a Job's task
	Jail          string            // the infra jail holding the pod's VNET
	HostIf        string            // the epair's host end, lp<12 hex>
	Addr          netip.Addr        // IPv4; the twin is derived
}

// Isolation is a namespace's isolation mode.
type Isolation string

// Isolation modes.
const (
	IsolationNamespace Isolation = "namespace" // the default: own namespace's tasks may connect
	IsolationOpen      Isolation = "open"      // every task may connect
	IsolationLocked    Isolation = "locked"    // only what policies allow, not even the namespace
)

// Peer names tasks (by namespace and service labels) or, in egress rules
// only, an IPv4 network.
type Peer struct {
	Namespace     string            // empty: the policy's own
	ServiceLabels map[string]string // empty: every task of the namespace, Jobs' included
	CIDR          netip.Prefix      // set: a network instead of tasks (egress, IPv4 only)
}

// PolicyPort is a task port a rule allows; Proto empty means tcp and udp.
type PolicyPort struct {
	Proto Proto
	Port  uint16
}

// PolicyRule allows traffic from (ingress) or to (egress) its peers on its
// ports. No peers: every task (ingress) or anywhere (egress). No ports:
// every port.
type PolicyRule struct {
	Peers []Peer
	Ports []PolicyPort
}

// Policy is a NetworkPolicy. Services selects the namespace's services by
// labels (empty: all of them). Egress nil limits nothing; empty but not nil
// allows nothing more than DNS.
type Policy struct {
	Namespace string
	Name      string
	Services  map[string]string
	Ingress   []PolicyRule
	Egress    *[]PolicyRule
}

// selects reports whether the policy applies to a service's tasks.
func (p Policy) selects(namespace, service string, labels map[string]string) bool {
	if p.Namespace != namespace || service == "" {
		return false
	}
	return labelsMatch(p.Services, labels)
}

// labelsMatch reports whether labels hold every pair of sel.
func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if w, ok := labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}
