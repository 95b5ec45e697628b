package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	bolt "go.etcd.io/bbolt"
)

// fsm is the persistent state machine. An apply batch writes its objects
// and the last applied index in one transaction; entries at or below the
// stored index are skipped, so raft replaying its log after a restart
// re-applies nothing.
type fsm struct {
	db      *bolt.DB
	commit  *committer
	hist    *history
	log     *slog.Logger
	applied atomic.Uint64
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var events []Event
	var last uint64
	// The apply may share a transaction (and its fsyncs) with a log append
	// running at the same time, and run again alone if that transaction
	// fails, so it starts from scratch.
	err := f.commit.update(func(tx *bolt.Tx) error {
		objs, meta := tx.Bucket(bucketObjects), tx.Bucket(bucketMeta)
		applied := readU64(meta.Get(keyApplied))
		events, last = events[:0], 0
		clear(out)
		for i, l := range logs {
			if l.Index <= applied {
				continue
			}
			last = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			var c command
			if err := json.Unmarshal(l.Data, &c); err != nil {
				out[i] = &result{err: fmt.Errorf("log entry %d: decoding command: %w", l.Index, err)}
				continue
			}
			r, ev := applyCommand(objs, &c, l.Index)
			out[i] = r
			if ev != nil {
				events = append(events, *ev)
			}
		}
		if last == 0 {
			return nil
		}
		return meta.Put(keyApplied, u64(last))
	})
	if err != nil {
		// The disk refused a write: carrying on would diverge from the
		// other replicas.
		panic(fmt.Sprintf("store: applying log entries: %v", err))
	}
	if last != 0 {
		f.applied.Store(last)
	}
	f.hist.append(events)
	return out
}

func applyCommand(b *bolt.Bucket, c *command, index uint64) (*result, *Event) {
	key := []byte(c.key())
	var prev legion.Object
	if raw := b.Get(key); raw != nil {
		o, err := legion.FromJSON(raw)
		if err != nil {
			return &result{err: fmt.Errorf("%s: decoding stored object: %w", key, err)}, nil
		}
		prev = o
	}
	if c.MustNotExist && prev != nil {
		return &result{prev: prev, err: fmt.Errorf("%s %s: %w", c.Kind, displayKey(c), ErrExists)}, nil
	}
	if c.Version != 0 {
		switch {
		case prev == nil:
			return &result{err: fmt.Errorf("%s %s: expected version %d, found none: %w", c.Kind, displayKey(c), c.Version, ErrConflict)}, nil
		case prev.GetMetadata().Version != c.Version:
			return &result{prev: prev, err: fmt.Errorf("%s %s: expected version %d, found %d: %w",
				c.Kind, displayKey(c), c.Version, prev.GetMetadata().Version, ErrConflict)}, nil
		}
	}
	switch c.Op {
	case opDelete:
		if prev == nil {
			return &result{err: fmt.Errorf("%s %s: %w", c.Kind, displayKey(c), ErrNotFound)}, nil
		}
		if err := b.Delete(key); err != nil {
			return &result{err: err}, nil
		}
		gone := legion.Clone(prev)
		gone.GetMetadata().Version = index
		return &result{obj: gone, prev: prev}, &Event{Type: Deleted, Version: index, Object: gone, memo: &memo{}}
	case opPut, opStatus:
	default:
		return &result{err: fmt.Errorf("unknown command %q", c.Op)}, nil
	}
	in, err := legion.FromJSON(c.Object)
	if err != nil {
		return &result{err: err}, nil
	}
	var obj legion.Object
	switch {
	case c.Op == opStatus:
		if prev == nil {
			return &result{err: fmt.Errorf("%s %s: status write: %w", c.Kind, displayKey(c), ErrNotFound)}, nil
		}
		obj = legion.Clone(prev)
		if err := copyPart(obj.StatusPtr(), in.StatusPtr()); err != nil {
			return &result{err: err}, nil
		}
	default:
		obj = in
		if c.KeepStatus && prev != nil {
			if err := copyPart(obj.StatusPtr(), prev.StatusPtr()); err != nil {
				return &result{err: err}, nil
			}
		}
	}
	m := obj.GetMetadata()
	m.Name, m.Namespace = c.Name, c.Namespace
	m.Version = index
	if prev == nil {
		m.UID = uidFromIndex(index)
		m.Generation = 1
	} else {
		pm := prev.GetMetadata()
		m.UID = pm.UID
		m.Generation = pm.Generation
		if c.Op == opPut && !sameJSON(obj.SpecPtr(), prev.SpecPtr()) {
			m.Generation++
		}
	}
	data, err := legion.MarshalJSON(obj)
	if err != nil {
		return &result{err: err}, nil
	}
	if err := b.Put(key, data); err != nil {
		return &result{err: err}, nil
	}
	t := Added
	if prev != nil {
		t = Modified
	}
	return &result{obj: obj, prev: prev}, &Event{Type: t, Version: index, Object: legion.Clone(obj), memo: &memo{}}
}

func displayKey(c *command) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// uidFromIndex derives an object's uid from the index that created it,
// so every replica computes the same one and no two objects share it.
func uidFromIndex(index uint64) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", index)
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// copyPart copies a spec or status from src into dst through JSON (both
// point to the same type); nil for kinds without the part.
func copyPart(dst, src any) error {
	if dst == nil || src == nil {
		return nil
	}
	data, err := json.Marshal(src)
	if err != nil {
		return err
	}
	// Replace, not merge: fields the source leaves out (false, empty,
	// omitted) must not keep the destination's old values.
	v := reflect.ValueOf(dst).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(data, dst)
}

// snapshotData is a snapshot's content: the objects as JSON and the index
// they were read at.
type snapshotData struct {
	Index   uint64            `json:"index"`
	Objects []json.RawMessage `json:"objects"`
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	var s snapshotData
	err := f.db.View(func(tx *bolt.Tx) error {
		s.Index = readU64(tx.Bucket(bucketMeta).Get(keyApplied))
		return tx.Bucket(bucketObjects).ForEach(func(_, v []byte) error {
			s.Objects = append(s.Objects, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading objects for a snapshot: %w", err)
	}
	return &s, nil
}

func (s *snapshotData) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s); err != nil {
		sink.Cancel()
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshotData) Release() {}

// Restore replaces every object with a snapshot's, in one transaction,
// and ends open watches with ErrReset.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s snapshotData
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("decoding snapshot: %w", err)
	}
	err := f.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketObjects); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucketObjects)
		if err != nil {
			return err
		}
		for _, raw := range s.Objects {
			o, err := legion.FromJSON(raw)
			if err != nil {
				return fmt.Errorf("snapshot object: %w", err)
			}
			if err := b.Put([]byte(legion.ObjectKey(o)), raw); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyApplied, u64(s.Index))
	})
	if err != nil {
		return fmt.Errorf("restoring snapshot at %d: %w", s.Index, err)
	}
	f.applied.Store(s.Index)
	f.hist.reset(s.Index)
	f.log.Info("restored snapshot", "index", s.Index, "objects", len(s.Objects))
	return nil
}

// prefix returns the key prefix that lists a kind, or a kind in one
// namespace.
func prefix(kind legion.Kind, namespace string) string {
	if namespace == "" && kind.Namespaced() {
		return string(kind) + "/"
	}
	return string(kind) + "/" + namespace + "/"
}
