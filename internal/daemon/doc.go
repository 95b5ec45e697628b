// Package daemon is a Legion node's agent side, composed from the
// library's parts: the agent with its runtime, image store, pod network,
// node resolver and ingress proxy. The manager side (API, store, the
// leader's work) is cluster/manager's; RunAgent runs beside it and
// reaches it, as every node does, through a dispatcher session. Run is
// `legion up`: both in one process, the agent talking to its own manager
// over loopback. cmd/legion's daemon and up commands are thin wrappers.
package daemon
