package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
)

// Requirement names an object that must exist when a write applies, or
// the write fails with ErrConflict: a controller's write for an owner
// deleted since it read the owner is refused where the deletion is
// ordered, in the log, not by a check that could race it.
type Requirement struct {
	Kind      legion.Kind `json:"kind"`
	Namespace string      `json:"namespace,omitempty"`
	Name      string      `json:"name"`
	// UID, when set, must be the object's: one deleted and made again
	// under the same name does not meet it.
	UID string `json:"uid,omitempty"`
}

// Write is one write of WriteAll: a put of Object (or, with Delete, the
// deletion of the object of Object's kind, namespace and name).
type Write struct {
	Object   legion.Object
	Delete   bool
	Options  WriteOptions
	Requires []Requirement
}

// writeAllWindow is how many writes WriteAll has in flight at once: one
// raft append's worth (Open sets MaxAppendEntries to 512), so a bulk
// write costs an fsync per window rather than one per write.
const writeAllWindow = 512

// WriteAll applies many writes, each its own log entry with its own
// preconditions (so each gets its own version and uid, and watchers see
// each as usual), submitted without waiting for one another so raft
// commits them in shared appends. It returns one error per write, nil
// for those applied; a failure of one does not stop the others. Writes
// are applied in order.
func (s *Store) WriteAll(ctx context.Context, writes []Write) []error {
	errs := make([]error, len(writes))
	for start := 0; start < len(writes); start += writeAllWindow {
		end := min(start+writeAllWindow, len(writes))
		encoded := make([][]byte, end-start)
		total := 0
		for i := start; i < end; i++ {
			data, err := encodeWrite(&writes[i])
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				errs[i] = err
				continue
			}
			encoded[i-start], total = data, total+len(data)
		}
		// The window goes to raft together, so the log must have room
		// for all of it, as for a single write (see roomForWrites).
		if err := s.roomForWrites(total); err != nil {
			for i := start; i < end; i++ {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("%s: %w", legion.ObjectKey(writes[i].Object), err)
				}
			}
			continue
		}
		futures := make([]raft.ApplyFuture, end-start)
		for i := start; i < end; i++ {
			if encoded[i-start] != nil {
				futures[i-start] = s.raft.Apply(encoded[i-start], s.cfg.WriteTimeout)
			}
		}
		for i := start; i < end; i++ {
			f := futures[i-start]
			if f == nil {
				continue
			}
			if err := s.wait(ctx, f, "write", true); err != nil {
				errs[i] = err
				continue
			}
			r, _ := f.Response().(*result)
			if r == nil {
				errs[i] = fmt.Errorf("%s: the state machine gave no answer", legion.ObjectKey(writes[i].Object))
				continue
			}
			errs[i] = r.err
		}
	}
	return errs
}

func encodeWrite(w *Write) ([]byte, error) {
	o := w.Object
	m := o.GetMetadata()
	c := &command{Kind: o.GetKind(), Namespace: m.Namespace, Name: m.Name,
		MustNotExist: w.Options.Precondition.MustNotExist, Version: w.Options.Precondition.Version,
		Requires: w.Requires}
	if w.Delete {
		c.Op = opDelete
	} else {
		if m.Name == "" {
			return nil, fmt.Errorf("%s: metadata.name: missing", o.GetKind())
		}
		if o.GetKind().Namespaced() != (m.Namespace != "") {
			return nil, fmt.Errorf("%s %s: metadata.namespace: a namespaced kind needs one, a cluster-scoped kind has none", o.GetKind(), m.Name)
		}
		data, err := legion.MarshalJSON(o)
		if err != nil {
			return nil, err
		}
		c.Op, c.Object, c.KeepStatus = opPut, data, w.Options.KeepStatus
	}
	data, err := c.encode()
	if err != nil {
		return nil, err
	}
	// Every entry is held to MaxEntry, whichever path proposes it.
	if err := checkEntry(c, data); err != nil {
		return nil, err
	}
	return data, nil
}

// checkRequires refuses a command whose required objects are gone or were
// made again since.
func checkRequires(b *batchWriter, c *command) error {
	for _, r := range c.Requires {
		raw := b.get([]byte(legion.Key(r.Kind, r.Namespace, r.Name)))
		if raw == nil {
			return fmt.Errorf("%s %s: requires %s %s, which is gone: %w", c.Kind, displayKey(c), r.Kind, requiredName(r), ErrConflict)
		}
		if r.UID == "" {
			continue
		}
		var m struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s %s: reading required %s %s: %w", c.Kind, displayKey(c), r.Kind, requiredName(r), err)
		}
		if m.Metadata.UID != r.UID {
			return fmt.Errorf("%s %s: requires %s %s of uid %s, found uid %s: %w",
				c.Kind, displayKey(c), r.Kind, requiredName(r), r.UID, m.Metadata.UID, ErrConflict)
		}
	}
	return nil
}

func requiredName(r Requirement) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}
