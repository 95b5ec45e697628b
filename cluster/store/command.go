package store

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/jsonfast"
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

// commandRest is a command's fields but its object, named as command
// names them (encode, decodeCommand).
type commandRest struct {
	Op           op            `json:"op"`
	Kind         legion.Kind   `json:"kind"`
	Namespace    string        `json:"namespace,omitempty"`
	Name         string        `json:"name"`
	MustNotExist bool          `json:"mustNotExist,omitempty"`
	Version      uint64        `json:"version,omitempty"`
	KeepStatus   bool          `json:"keepStatus,omitempty"`
	Requires     []Requirement `json:"requires,omitempty"`
	// Object is never in the rest: one there is refused (decodeCommand).
	Object json.RawMessage `json:"object,omitempty"`
}

// objectFirst is how a command carrying an object begins (encode).
const objectFirst = `{"object":`

// encode is the command as JSON with its object first, copied as it is:
// the encoder would go over it again to validate and copy it character
// by character (a quarter of the cost of proposing a 512-byte Config),
// and with the object first each replica's state machine takes it
// without decoding it twice (decodeCommand). The object must be what
// json.Marshal made (compact, HTML escaped), as every caller's is; any
// JSON decoder reads the command as json.Marshal's form
// (TestCommandEncodingIsJSON).
func (c *command) encode() ([]byte, error) {
	if len(c.Object) == 0 {
		return json.Marshal(c)
	}
	rest, err := json.Marshal(commandRest{Op: c.Op, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name,
		MustNotExist: c.MustNotExist, Version: c.Version, KeepStatus: c.KeepStatus, Requires: c.Requires})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(objectFirst)+len(c.Object)+len(rest))
	out = append(out, objectFirst...)
	out = append(out, c.Object...)
	out = append(out, ',')
	return append(out, rest[1:]...), nil
}

// entry is the command as the log entry every path proposes: encoded,
// and held to MaxEntry.
func (c *command) entry() ([]byte, error) {
	data, err := c.encode()
	if err != nil {
		return nil, err
	}
	if err := checkEntry(c, data); err != nil {
		return nil, err
	}
	return data, nil
}

// decodeCommand reads a log entry's command. A write encode made with
// its object first has the object taken as it lies (it is decoded once,
// by the state machine, which refuses it if it is not JSON) and the rest
// decoded; json.Unmarshal reads any other, as entries written before the
// object came first. Both read encode's commands alike, and a command
// json.Unmarshal refuses changes nothing either way (FuzzDecodeCommand).
// The command's object shares data.
func decodeCommand(data []byte, c *command) error {
	if n := objectEnd(data); n > 0 {
		rest := make([]byte, 0, len(data)-n)
		rest = append(append(rest, '{'), data[n+1:]...)
		var r commandRest
		// Only writes, which decode their object before anything is
		// written: one that is not JSON changes nothing here, as on a
		// replica whose json.Unmarshal refused the whole command.
		if jsonfast.Unmarshal(rest, &r) == nil && r.Object == nil && (r.Op == opPut || r.Op == opStatus) {
			*c = command{Op: r.Op, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
				Object:       json.RawMessage(data[len(objectFirst):n]),
				MustNotExist: r.MustNotExist, Version: r.Version, KeepStatus: r.KeepStatus, Requires: r.Requires}
			return nil
		}
	}
	*c = command{}
	return jsonfast.Unmarshal(data, c)
}

// objectEnd is where the object of a command encoded with its object
// first ends (the index of the comma after it), or 0 when data is not
// such a command: the object's braces are counted outside its strings.
func objectEnd(data []byte) int {
	if !bytes.HasPrefix(data, []byte(objectFirst)) || len(data) <= len(objectFirst) || data[len(objectFirst)] != '{' {
		return 0
	}
	depth := 0
	for i := len(objectFirst); i < len(data); i++ {
		switch b := data[i]; {
		case b == '"':
			// Most of an object is its strings (a value's base64 above
			// all): their end is found with IndexByte, which goes over
			// many bytes at a time, rather than byte by byte.
			end := stringEnd(data, i+1)
			if end < 0 {
				return 0
			}
			i = end
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
			if depth == 0 {
				if i+1 < len(data) && data[i+1] == ',' {
					return i + 1
				}
				return 0
			}
		}
	}
	return 0
}

// stringEnd is the index of the quote closing the JSON string whose
// content starts at from, or -1 when it is not closed.
func stringEnd(data []byte, from int) int {
	for i := from; ; {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return -1
		}
		e := bytes.IndexByte(data[i:i+q], '\\')
		if e < 0 {
			return i + q
		}
		i += e + 2 // past the backslash and the character it escapes
		if i > len(data) {
			return -1
		}
	}
}

// Precondition guards a write.
type Precondition struct {
	MustNotExist bool   // the key must be free
	Version      uint64 // when non-zero, the object must be at this version
}

// result is what the state machine answers for one command.
type result struct {
	obj  legion.Object // the object written (or deleted); see object
	prev legion.Object // what a put or a refused write found there, if anything
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
	return legion.FromJSONAs(r.kind, r.data)
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
	// Term is the Raft term of the entry at Version: the two name one
	// point of one history (Raft's log matching), which a watcher of
	// another replica can check it shares. Zero when not known (events
	// made of a reading).
	Term   uint64
	Object legion.Object // for Deleted, the object as it was, at Version
	memo   *memo
	stored []byte // see StoredJSON
}

// StoredJSON is the object as the store holds it, legion.MarshalJSON of
// Object byte for byte, when the replica's state machine wrote it (an
// Added or Modified event it applied); nil otherwise. It is shared: read
// it, never write it. A watcher that keeps objects as JSON (the
// dispatcher's per-node tasks) spares encoding each one again.
func (e Event) StoredJSON() []byte { return e.stored }

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
