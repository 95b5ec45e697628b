package store

import "errors"

// Errors callers branch on.
var (
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("not found")
	// ErrExists: a MustNotExist write found an object.
	ErrExists = errors.New("already exists")
	// ErrConflict: a Version(n) precondition did not hold.
	ErrConflict = errors.New("version conflict")
	// ErrNotLeader: writes and linearizable reads need the leader.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoQuorum: the write or read got no answer from a quorum in time;
	// a write may still apply.
	ErrNoQuorum = errors.New("no quorum")
	// ErrCompacted: a watch asked for a version older than the history held.
	ErrCompacted = errors.New("watch history compacted")
	// ErrReset: a snapshot was installed; watchers must list again.
	ErrReset = errors.New("watch reset by a snapshot install")
	// ErrClosed: the store is shut down.
	ErrClosed = errors.New("store closed")
)
