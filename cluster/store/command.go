package store

import (
	"encoding/json"
	"sync"

	"github.com/legionbsd/legion"
)

// op is what a log entry does. Commands carry no replica-specific data:
// every replica computes the same objects from them.
type op string

const (
	opPut    op = "put"    // replace labels, spec and (unless keepStatus) status
	opStatus op = "status" // replace status only; spec, labels and generation stay
	opDelete op = "delete"
)

// command is one log entry's payload, as JSON.
type command struct {
	Op        op              `json:"op"`
	Kind      legion.Kind     `json:"kind"`
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	Object    json.RawMessage `json:"object,omitempty"`
	// Preconditions.
	MustNotExist bool   `json:"mustNotExist,omitempty"`
	Version      uint64 `json:"version,omitempty"`
	// KeepStatus keeps the stored status on a put (server-side apply).
	KeepStatus bool `json:"keepStatus,omitempty"`
	// Requires: objects that must exist for the command to apply (batch.go).
	Requires []Requirement `json:"requires,omitempty"`
}

func (c *command) key() string { return legion.Key(c.Kind, c.Namespace, c.Name) }

// The fields of a command around its object, in the order command has
// them (encode).
type (
	commandHead struct {
		Op        op          `json:"op"`
		Kind      legion.Kind `json:"kind"`
		Namespace string      `json:"namespace,omitempty"`
		Name      string      `json:"name"`
	}
	commandTail struct {
		MustNotExist bool          `json:"mustNotExist,omitempty"`
		Version      uint64        `json:"version,omitempty"`
		KeepStatus   bool          `json:"keepStatus,omitempty"`
		Requires     []Requirement `json:"requires,omitempty"`
	}
)

// encode is json.Marshal(c), byte for byte, without the encoder going
// over the object again: it validates and copies a RawMessage character
// by character (a quarter of the cost of proposing a 512-byte Config).
// The object must be what json.Marshal made (compact, HTML escaped), as
// every caller's is; TestCommandEncodingIsJSONMarshal holds them equal.
func (c *command) encode() ([]byte, error) {
	if len(c.Object) == 0 {
		return json.Marshal(c)
	}
	head, err := json.Marshal(commandHead{Op: c.Op, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name})
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(commandTail{MustNotExist: c.MustNotExist, Version: c.Version, KeepStatus: c.KeepStatus, Requires: c.Requires})
	if err != nil {
		return nil, err
	}
	const objectKey = `,"object":`
	out := make([]byte, 0, len(head)+len(objectKey)+len(c.Object)+len(tail))
	out = append(out, head[:len(head)-1]...)
	out = append(out, objectKey...)
	out = append(out, c.Object...)
	if len(tail) > len("{}") {
		out = append(out, ',')
		return append(out, tail[1:]...), nil
	}
	return append(out, '}'), nil
}

// Precondition guards a write.
type Precondition struct {
	MustNotExist bool   // the key must be free
	Version      uint64 // when non-zero, the object must be at this version
}

// result is what the state machine answers for one command.
type result struct {
	obj  legion.Object // the object written (or deleted); see object
	prev legion.Object // what was there before, if anything
	err  error
	// data is the object written, as stored, when obj is left for the
	// writer to decode (object).
	kind legion.Kind
	data []byte
	// The metadata the state machine gave the object written.
	version, generation uint64
	uid                 string
}

// object is the object written (or deleted), decoded for the writer from
// what the state machine stored when it did not decode it itself.
func (r *result) object() (legion.Object, error) {
	if r.obj != nil || r.data == nil {
		return r.obj, nil
	}
	return decodeObject(r.kind, r.data)
}

// EventType says what happened to an object.
type EventType string

// Event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one applied change, at the Raft index that made it. Events
// are shared by every watcher: treat Object as read-only.
type Event struct {
	Type    EventType
	Version uint64
	Object  legion.Object // for Deleted, the object as it was, at Version
	memo    *memo
}

type memo struct {
	once sync.Once
	v    any
	err  error
}

// Encoded returns encode(e.Object), computed once per event however many
// watchers ask, so a change fans out to many watches at the cost of one
// encoding.
func (e Event) Encoded(encode func(legion.Object) (any, error)) (any, error) {
	if e.memo == nil {
		return encode(e.Object)
	}
	e.memo.once.Do(func() { e.memo.v, e.memo.err = encode(e.Object) })
	return e.memo.v, e.memo.err
}
