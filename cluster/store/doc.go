// Package store is a manager's replicated object store: hashicorp/raft
// over one bbolt file that holds the Raft log, the stable store (term and
// vote), the current snapshot and the persistent state machine (the
// objects and the last applied index, written in the same transaction).
//
// Keys are Kind/namespace/name; an object's version is the Raft index of
// its last write, its uid derives from the index that created it and its
// generation bumps only when its spec changes. The last 4096 applied
// events are held in memory for list-then-watch.
//
// It imports the object model (package legion) and raft/bbolt only: no
// gRPC, no CLI, no PKI. The Raft transport is supplied by the caller.
package store
