// Package netbsd is everything the node agent does to a FreeBSD node's
// network, on the address plan of netbsd/addrplan: the legion0 bridge and the pods' epairs, the WireGuard
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
// How the agent uses it:
//
//   - At start, Host.SetUpNode loads the modules, sets the bridge and
//     forwarding sysctls, makes legion0, wg0 (and the WireGuard key on first
//     start) and the mesh routes, changing nothing already in place.
//   - Per pod, Host.JoinPod makes its epair (host end lp<12 hex of the task
//     uid) or adopts it after a restart; Host.LeavePod destroys it.
//   - A new pod's containers wait in Guards.Wait until PF.ApplyPolicy has
//     loaded a guard for its address (GuardDeadline, then ErrNotGuarded).
//   - On every endpoints or policy update, PF.ApplyServices and
//     PF.ApplyPolicy bring legion/svc and legion/policy to the new state:
//     tables only when only membership or readiness changed, the whole
//     anchor when services, policies or local pods changed. Passing nil
//     (nothing received since the agent started) leaves pf as it is.
//   - On every peer list, Mesh.Converge adds, changes and removes only the
//     wg0 peers that differ; nil leaves wg0 as it is.
//
// Pure pieces usable on their own: RenderServices, RenderPolicy,
// PlanAnchor, PlanPeers and PlanStateKills.
//
// It imports only the standard library, sys and netbsd/addrplan. It must not import
// the legion object model: the agent translates objects into these types.
package netbsd
