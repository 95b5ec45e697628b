// Package netbsd is everything the node agent does to a FreeBSD node's
// network: the address plan (a pod /24 per node, pod addresses, VIPs and
// their IPv6 twins), the legion0 bridge and the pods' epairs, the WireGuard
// mesh, and the pf anchors under legion/ (service tables, VIP and published
// port redirection, hairpin and mesh NAT, network policy guards).
//
// The package is split into pure renderers, which take the cluster's state
// in the package's own terms (Node, Service, Endpoint, Pod, Policy) and
// return exact pf text and command lines, and thin appliers, which read what
// the host already has, run the rendered commands through a sys.Runner and
// interpret the answers the phase-0 lab recorded (for example, pfctl -T show
// on a missing table answering "Table does not exist" means empty).
//
// It imports only the standard library and internal/sys. It must not import
// the legion object model: the agent translates objects into these types.
package netbsd
