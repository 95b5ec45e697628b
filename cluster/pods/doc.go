// Package pods is the manager's side of sessions (spec 3.8 "Sessions"):
// the Pods service users call for a task's logs, and the Sessions service
// every agent keeps a stream open with, over which the manager offers a
// session to the agent of the task's node and then relays what the agent
// sends back through Attach. Any manager reaches any node this way, with
// no port open on the node and no forwarding between managers.
//
// Only logs are served; the messages leave room for exec and
// port-forward. Callers are checked here too (admin or manager
// certificates for Pods, node certificates for Sessions), so the package
// is safe on a port without the server's interceptors.
//
// It reads objects through the small Objects interface (a *store.Store
// is one) and must not import cluster/server, the agent or any runtime.
package pods
