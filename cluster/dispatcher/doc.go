// Package dispatcher is the manager's side of the Dispatcher;
// internal/agent/dispatcherclient is the node's side. It serves the
// Dispatcher gRPC service (internal/proto, dispatcher.proto) that nodes
// register with, send heartbeats to, follow their assignments through,
// report task status to and claim the Volumes of their tasks from.
//
// Every manager serves it. Assignments stream from the local replica, so a
// follower serves them too; registration, heartbeats, reports and volume
// claims need the leader and a follower answers them with UNAVAILABLE naming the leader
// (a legionpb.NotLeader detail), so agents go there. The node a call acts
// for is the one its client certificate names: a node sees and writes only
// its own tasks.
//
// It must not import the agent side (internal/agent and below), cluster/server
// or cluster/controller: the controller consumes Service through its Signals
// interface.
package dispatcher
