// Package dispatcherclient is the node's side of the Dispatcher;
// cluster/dispatcher is the manager's side. A Session registers the node
// with the managers, sends a heartbeat every legion.HeartbeatPeriod,
// follows the node's assignments, reports task status and claims and
// releases the Volumes its tasks use, failing over
// between managers (the list is learned from heartbeat replies, writes go
// to the leader a follower names). It implements agent.Manager for an
// agent on a host without a manager, or one that must survive its own
// manager's outage. Nothing is persisted.
//
// It talks to managers only through the generated client of
// internal/proto; it must not import cluster/... (the server side).
package dispatcherclient
