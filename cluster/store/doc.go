// Package store is a manager's replicated object store: hashicorp/raft
// over the Raft log's segment files (data-dir/raft-log, one write and one
// fdatasync per append), the term and vote beside them (raft-log/vote, so
// a lost store.db cannot take them), and one bbolt file, store.db, that
// holds the current snapshot and the persistent state machine (the
// objects and the last applied index, written in the same transaction).
// Damage to either is refused at open with what to do, never cut away
// silently: only a torn final append is.
//
// A write is acknowledged once its entry is fsynced in the log of a
// quorum and applied in memory; the state machine's changes reach the
// bbolt file shortly after, and after a crash raft applies again from the
// log whatever the file lacks (see pending.go).
//
// Keys are Kind/namespace/name; an object's version is the Raft index of
// its last write, its uid derives from the index that created it and its
// generation bumps only when its spec changes. The last 4096 applied
// events are held in memory for list-then-watch.
//
// It imports the object model (package legion) and raft/bbolt only: no
// gRPC, no CLI, no PKI. The Raft transport is supplied by the caller.
package store
