// Package sessionsclient is the node's side of sessions (logs, exec and
// port-forward); cluster/sessions is the manager's side. It keeps a
// Sessions stream open with every manager, so any manager can reach this
// node without a port open on it, and answers each offer by attaching to
// the manager that made it: a container's log as the runtime gives it (or,
// once the pod is gone, the output the agent saved), a command run in a
// running container, or a connection to a port of a pod of this node.
//
// It reaches the runtime through functions (jail.Runtime's Logs and Exec
// are such) and must not import the cluster packages or a concrete
// runtime.
package sessionsclient
