// Package endpoints computes what every node needs to reach the cluster's
// services: each service's VIP, ports and ready tasks. Managers compute it
// from their replica and stream it to the agents with their assignments;
// a node turns it into load balancing (pf or the loopback proxy) and DNS.
//
// It is pure: it imports only the object model.
package endpoints

import (
	"net"
	"sort"

	"github.com/legionbsd/legion"
)

// Service is one service as nodes see it.
type Service struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	VIP       string            `json:"vip,omitempty"` // none for dnsrr services
	DNSRR     bool              `json:"dnsrr,omitempty"`
	Stateful  bool              `json:"stateful,omitempty"`
	Ports     []Port            `json:"ports,omitempty"`
	// Tasks are its ready tasks, by name. Held by pointer: an agent makes
	// a service's list again at every change to it (the list it handed
	// over is shared), and in a rollout that is every service at every
	// message, so the copy is of pointers, not of the tasks.
	Tasks []*Task `json:"tasks,omitempty"`
}

// Port is a service port with its target resolved to a number.
type Port struct {
	Name          string             `json:"name,omitempty"`
	Protocol      legion.Protocol    `json:"protocol"`
	Port          int                `json:"port"`
	TargetPort    int                `json:"targetPort"`
	Publish       legion.PublishMode `json:"publish,omitempty"`
	PublishedPort int                `json:"publishedPort,omitempty"`
}

// Task is a ready task of a service.
type Task struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	Node string `json:"node"`
	Slot int    `json:"slot"`
}

// Ready reports whether a task belongs in its service's endpoints: told to
// run, running, ready, with an address. Its node must serve too
// (NodeServes).
func Ready(t *legion.Task) bool {
	return t.Spec.Owner.Kind == legion.KindService && t.Spec.DesiredState == legion.TaskRunning &&
		t.Status.State == legion.TaskRunning && t.Status.Ready && t.Status.IP != ""
}

// NodeServes reports whether the ready tasks of node n (nil: not known)
// belong in endpoints (legion.NodeState.InEndpoints).
func NodeServes(n *legion.Node) bool { return n == nil || n.Status.State.InEndpoints() }

// Compute lists every service with its ready tasks, in name order, so the
// same state always gives the same list.
func Compute(services []*legion.Service, tasks []*legion.Task) []Service {
	ready := map[string][]*Task{}
	for _, t := range tasks {
		if !Ready(t) {
			continue
		}
		k := t.Metadata.Namespace + "/" + t.Spec.Owner.Name
		ready[k] = append(ready[k], TaskOf(t))
	}
	out := make([]Service, 0, len(services))
	for _, s := range services {
		e := Head(s)
		e.Tasks = ready[e.Namespace+"/"+e.Name]
		sort.Slice(e.Tasks, func(i, j int) bool { return e.Tasks[i].Name < e.Tasks[j].Name })
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Head is service s as nodes see it, without its tasks: what changes
// only with the Service itself.
func Head(s *legion.Service) Service {
	e := Service{Namespace: s.Metadata.Namespace, Name: s.Metadata.Name, Labels: s.Metadata.Labels,
		DNSRR: s.Spec.Endpoint.Mode == legion.EndpointDNSRR, Stateful: s.Spec.Mode == legion.ModeStateful}
	if !e.DNSRR {
		e.VIP = s.Status.VIP
	}
	for _, p := range s.Spec.Endpoint.Ports {
		target := p.TargetPort.Number
		if p.TargetPort.Name != "" {
			cp, ok := s.Spec.Pod.FindPort(p.TargetPort)
			if !ok {
				continue
			}
			target = cp.ContainerPort
		}
		e.Ports = append(e.Ports, Port{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: target,
			Publish: p.Publish, PublishedPort: p.PublishedPort})
	}
	return e
}

// TaskOf is task t as its service's endpoints list it (when Ready).
func TaskOf(t *legion.Task) *Task {
	return &Task{Name: t.Metadata.Name, IP: t.Status.IP, Node: t.Spec.Node, Slot: t.Spec.Slot}
}

// Peer is a node of the WireGuard mesh as the other nodes need it: its pod
// subnet and key, and where it listens when it says.
type Peer struct {
	Name      string `json:"name"`
	PodCIDR   string `json:"podCidr"`
	PublicKey string `json:"publicKey"`
	// Endpoint is host:port of its WireGuard listener: the one it
	// advertises, else its address at the port of the design; empty when
	// it has neither (it is reached once it has reached the other side).
	Endpoint string `json:"endpoint,omitempty"`
}

// WireGuardPort is where a node's wg0 listens unless it says otherwise.
const WireGuardPort = "51820"

// Peers lists the nodes that can be peers, with a pod subnet and a key,
// in name order. Down nodes stay: a peer goes when its Node is removed.
func Peers(nodes []*legion.Node) []Peer {
	out := []Peer{}
	for _, n := range nodes {
		wg := n.Status.WireGuard
		if wg == nil || wg.PublicKey == "" || n.Status.PodCIDR == "" {
			continue
		}
		p := Peer{Name: n.Metadata.Name, PodCIDR: n.Status.PodCIDR, PublicKey: wg.PublicKey, Endpoint: wg.Endpoint}
		if p.Endpoint == "" && n.Status.Addr != "" {
			p.Endpoint = net.JoinHostPort(n.Status.Addr, WireGuardPort)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
