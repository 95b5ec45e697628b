package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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

// writeAllWindow is how many writes WriteAll and PutAllInPlace propose
// together: one raft append's worth (Open sets MaxAppendEntries to 512),
// so a bulk write costs an fsync per window rather than one per write.
// Two windows are in flight at most (proposeAll).
const writeAllWindow = 512

// WriteAll applies many writes, each its own log entry with its own
// preconditions (so each gets its own version and uid, and watchers see
// each as usual), submitted without waiting for one another so raft
// commits them in shared appends. It returns one error per write, nil
// for those applied; a failure of one does not stop the others. Writes
// are applied in order.
func (s *Store) WriteAll(ctx context.Context, writes []Write) []error {
	errs := make([]error, len(writes))
	encoded := make([][]byte, len(writes))
	for i := range writes {
		encoded[i], errs[i] = encodeWrite(&writes[i])
	}
	s.proposeAll(ctx, encoded, errs, func(i int) string { return legion.ObjectKey(writes[i].Object) })
	return errs
}

// Put is one write of PutAllInPlace.
type Put struct {
	Object  legion.Object
	Options WriteOptions
}

// PutAllInPlace writes each object as PutInPlace does, in order, each
// its own log entry, proposed without waiting for the ones before: raft
// commits them in shared appends, so a caller with many objects to write
// waits about as long as for one. prevs[i] and errs[i] are what
// PutInPlace would have returned for puts[i]; a failed write does not
// stop the later ones, which are in flight by then. When any object
// cannot be made an entry at all (it is invalid, or its entry too large)
// nothing is proposed and err says which.
func (s *Store) PutAllInPlace(ctx context.Context, puts []Put) (prevs []legion.Object, errs []error, err error) {
	cmds := make([]*command, len(puts))
	encoded := make([][]byte, len(puts))
	for i, p := range puts {
		c, err := putCommand(opPut, p.Object, p.Options)
		if err != nil {
			return nil, nil, err
		}
		data, err := c.entry()
		if err != nil {
			return nil, nil, err
		}
		cmds[i], encoded[i] = c, data
	}
	errs, prevs = make([]error, len(puts)), make([]legion.Object, len(puts))
	results := s.proposeAll(ctx, encoded, errs, func(i int) string { return string(cmds[i].Kind) + " " + displayKey(cmds[i]) })
	for i, r := range results {
		if r == nil {
			continue
		}
		prevs[i] = r.prev
		if r.err == nil {
			errs[i] = r.storedInto(puts[i].Object, puts[i].Options)
		}
	}
	return prevs, errs, nil
}

// proposeAll proposes the entries (a nil one is skipped: its error is in
// errs already) a window at a time, each window's without waiting for
// one another, and returns each one's answer from the state machine (nil
// where errs says why there is none). name names entry i in errors.
//
// The next window is proposed before the last one is waited for, so raft
// appends it while the last one commits and applies, rather than after:
// 2,048 writes of 1 KB on one manager took 52-63 ms one window after the
// other, 41-49 ms so (BenchmarkWriteAll; with three managers in one
// process the replicas' applies bound it either way). At most two
// windows are in flight, so the log's room is asked for two at the most.
func (s *Store) proposeAll(ctx context.Context, entries [][]byte, errs []error, name func(i int) string) []*result {
	results := make([]*result, len(entries))
	type window struct {
		start   int
		bytes   int
		futures []raft.ApplyFuture
	}
	var last *window // proposed, not yet waited for
	await := func(w *window) {
		for j, f := range w.futures {
			if f == nil {
				continue
			}
			i := w.start + j
			if err := s.wait(ctx, f, "write", true); err != nil {
				errs[i] = err
				continue
			}
			r, _ := f.Response().(*result)
			if r == nil {
				errs[i] = fmt.Errorf("%s: the state machine gave no answer", name(i))
				continue
			}
			results[i], errs[i] = r, r.err
		}
	}
	for start := 0; start < len(entries); start += writeAllWindow {
		end := min(start+writeAllWindow, len(entries))
		total := 0
		for i := start; i < end; i++ {
			if entries[i] != nil && errs[i] == nil {
				if errs[i] = ctx.Err(); errs[i] == nil {
					total += len(entries[i])
				}
			}
		}
		// The window goes to raft together, so the log must have room
		// for all of it, as for a single write (see roomForWrites), and
		// for the window still in flight.
		ahead := total
		if last != nil {
			ahead += last.bytes
		}
		if err := s.roomForWrites(ahead); err != nil {
			for i := start; i < end; i++ {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("%s: %w", name(i), err)
				}
			}
			continue
		}
		w := &window{start: start, bytes: total, futures: make([]raft.ApplyFuture, end-start)}
		for i := start; i < end; i++ {
			if entries[i] != nil && errs[i] == nil {
				w.futures[i-start] = s.raft.Apply(entries[i], s.cfg.WriteTimeout)
			}
		}
		if last != nil {
			await(last)
		}
		last = w
	}
	if last != nil {
		await(last)
	}
	return results
}

func encodeWrite(w *Write) ([]byte, error) {
	c := &command{Op: opDelete, Kind: w.Object.GetKind(), Namespace: w.Object.GetMetadata().Namespace, Name: w.Object.GetMetadata().Name,
		MustNotExist: w.Options.Precondition.MustNotExist, Version: w.Options.Precondition.Version}
	if !w.Delete {
		var err error
		if c, err = putCommand(opPut, w.Object, w.Options); err != nil {
			return nil, err
		}
	}
	c.Requires = w.Requires
	return c.entry()
}

// checkRequires refuses a command whose required objects are gone or were
// made again since.
func checkRequires(b *batchWriter, c *command) error {
	for _, r := range c.Requires {
		raw := b.get([]byte(legion.Key(r.Kind, r.Namespace, r.Name)))
		if raw == nil {
			return fmt.Errorf("%s %s: requires %s %s, which is gone: %w", c.Kind, displayKey(c), r.Kind, displayName(r.Namespace, r.Name), ErrConflict)
		}
		if r.UID == "" {
			continue
		}
		uid, err := storedUID(raw)
		if err != nil {
			return fmt.Errorf("%s %s: reading required %s %s: %w", c.Kind, displayKey(c), r.Kind, displayName(r.Namespace, r.Name), err)
		}
		if uid != r.UID {
			return fmt.Errorf("%s %s: requires %s %s of uid %s, found uid %s: %w",
				c.Kind, displayKey(c), r.Kind, displayName(r.Namespace, r.Name), r.UID, uid, ErrConflict)
		}
	}
	return nil
}

// storedUID reads metadata.uid from a stored object's JSON, stopping
// there: every task a planner writes requires its owner, and decoding
// the owner's whole spec for its uid was most of what the check cost. A
// stored object is as legion.MarshalJSON wrote it (its metadata near the
// start, each name once, spelled without escapes), so the first
// metadata.uid is the one.
func storedUID(raw []byte) (string, error) {
	d := headDecoder(raw)
	defer headDecoders.Put(d)
	if err := enterObject(d); err != nil {
		return "", err
	}
	if ok, err := findMember(d, `"metadata"`, math.MaxInt); !ok || err != nil {
		return "", err
	}
	if err := enterObject(d); err != nil {
		return "", err
	}
	if ok, err := findMember(d, `"uid"`, math.MaxInt); !ok || err != nil {
		return "", err
	}
	v, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	if v.Kind() != '"' {
		return "", fmt.Errorf("stored object: metadata.uid is %s, not a string", v)
	}
	uid, err := jsontext.AppendUnquote(nil, v)
	return string(uid), err
}

// enterObject reads d's next token, which must open an object.
func enterObject(d *jsontext.Decoder) error {
	tok, err := d.ReadToken()
	if err == nil && tok.Kind() != '{' {
		err = fmt.Errorf("stored object: %v where an object begins", tok)
	}
	return err
}

// findMember reads d's current object up to the value of the member
// named quoted (its name as JSON spells it), looking at its first most
// members, and reports whether it is there.
func findMember(d *jsontext.Decoder, quoted string, most int) (bool, error) {
	for i := 0; i < most && d.PeekKind() == '"'; i++ {
		name, err := d.ReadValue()
		if err != nil {
			return false, err
		}
		if string(name) == quoted {
			return true, nil
		}
		if err := d.SkipValue(); err != nil {
			return false, err
		}
	}
	return false, nil
}

// headDecoders keeps the decoders storedUID and withMetadata read the
// head of an object's JSON with: a replica applies on one goroutine, so
// one is made, not one per write.
var headDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// headDecoder is a decoder of headDecoders reading data in place (not
// copied); the caller puts it back. What it reads, encoding/json wrote,
// so it does not check member names for duplicates: that check found
// none and cost a put's withMetadata 2.7 µs against 1.7 µs without
// (BenchmarkApplyCommand create-requiring-owner, CPU profile).
func headDecoder(data []byte) *jsontext.Decoder {
	d := headDecoders.Get().(*jsontext.Decoder)
	d.Reset(bytes.NewBuffer(data), headOptions)
	return d
}

var headOptions = jsontext.AllowDuplicateNames(true)
