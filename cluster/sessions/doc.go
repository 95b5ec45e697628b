// Package sessions is the manager's side of sessions (logs, exec and
// port-forward); internal/agent/sessionsclient is the node's side. It
// serves two gRPC services: Pods, which users call, and Sessions, with
// which every agent keeps a stream open. For a call on Pods the manager
// offers a session to the agent of the task's node over that stream, and
// relays what the agent sends back through Attach. Any manager reaches any
// node this way, with no port open on the node and no forwarding between
// managers.
//
// Volume data moves the same way (4.3): CopyVolume joins one node's send
// session to another's receive session, so a migration needs no port on
// either node, and the Volumes service streams a Volume out to a backup
// file and back in. Backups and restores run on the leader (a follower
// forwards them through Options.Leader), which reads the Volume
// linearizably and makes a restored one.
//
// Callers are checked here too, so the package is safe on a port without
// the server's interceptors: users by their RoleBindings (view for logs,
// edit for exec and port-forward), the cluster admin and managers always;
// on Sessions, a node's certificate must be one the cluster recorded for
// that node (nodes joined before records existed have none until their
// first call), and a newer stream replaces an open one only with such
// proof.
//
// It reads objects through the small Objects interface (a *store.Store
// is one) and must not import cluster/server, the agent or any runtime.
package sessions
