// Package leader is the work only the leading manager does: the
// controller loop (cluster/controller), the allocation of service VIPs,
// the pinning of image tags to digests with their signature checks, and
// the moving of Volumes' data between nodes (through the sessions service
// it is given, as a VolumeMover).
// Run starts that work on whichever manager leads, as its store reports
// the election, and stops it when the leadership moves, whether or not
// the manager runs an agent: nothing here needs a node's runtime, image
// store or network. Tags are resolved by asking the registry directly.
//
// It reads and writes the store and asks registries; it must not import
// the node side (internal/agent, internal/daemon, jail and its runtimes)
// nor cluster/server: cluster/manager composes the two.
package leader
