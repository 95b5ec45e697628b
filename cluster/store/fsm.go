package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/jsonfast"
	bolt "go.etcd.io/bbolt"
)

// fsm is the persistent state machine. Each apply batch's changes and
// its last index go to the file together (see pending.go for when);
// entries at or below the index the state machine is at are skipped, so
// raft replaying its log after a restart re-applies nothing already in
// the file.
type fsm struct {
	db      *bolt.DB
	seal    *sealer // nil: values in the clear
	commit  *committer
	hist    *history
	log     *slog.Logger
	applied atomic.Uint64

	cur       atomic.Pointer[view]
	mu        sync.Mutex    // serialises publishing views
	restoreMu sync.RWMutex  // held by a snapshot install, so no read mixes old and new
	kick      chan struct{} // wakes the flusher after an apply
	// hold keeps applied changes out of the file, as a crash before they
	// reach it would: tests only.
	hold atomic.Bool
	// appliedRead is the file's applied index as a read transaction last
	// found it: every read asks for it, and it only changes with a
	// commit, which gives the file a new transaction ID. Opening the
	// sealed value each time cost a read a quarter of its time.
	appliedRead atomic.Pointer[appliedAt]
}

// appliedAt is the file's applied index in the state its transaction
// txid committed.
type appliedAt struct {
	txid    int
	applied uint64
}

func newFSM(db *bolt.DB, seal *sealer, commit *committer, hist *history, log *slog.Logger, applied uint64) *fsm {
	f := &fsm{db: db, seal: seal, commit: commit, hist: hist, log: log, kick: make(chan struct{}, 1)}
	f.cur.Store(&view{applied: applied})
	f.applied.Store(applied)
	commit.rider = f.persist
	return f
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var events []Event
	d := &delta{objects: map[string][]byte{}}
	err := f.read(func(r *reader) error {
		w := &batchWriter{r: r, d: d}
		for i, l := range logs {
			if l.Index <= r.v.applied {
				continue
			}
			d.applied = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			var c command
			if err := decodeCommand(l.Data, &c); err != nil {
				out[i] = &result{err: fmt.Errorf("log entry %d: decoding command: %w", l.Index, err)}
				continue
			}
			r, ev := applyCommand(w, &c, l.Index)
			out[i] = r
			if ev != nil {
				ev.Term = l.Term
				events = append(events, *ev)
			}
		}
		return nil
	})
	if err != nil {
		// The file cannot be read: carrying on would diverge from the
		// other replicas.
		panic(fmt.Sprintf("store: applying log entries: %v", err))
	}
	if d.applied == 0 {
		return out
	}
	f.publish(d)
	f.applied.Store(d.applied)
	f.hist.append(events)
	return out
}

func applyCommand(b *batchWriter, c *command, index uint64) (*result, *Event) {
	key := []byte(c.key())
	// cur is the stored object, decoded once: a status write or a delete
	// makes it the object written (their writers never ask what was there
	// before: result.prev is for puts and refused writes). Raft applies
	// on one goroutine, which every write of the cluster waits for.
	var cur legion.Object
	prevRaw := b.get(key)
	if prevRaw != nil {
		o, err := legion.FromJSONAs(c.Kind, prevRaw)
		if err != nil {
			return &result{err: fmt.Errorf("%s: decoding stored object: %w", key, err)}, nil
		}
		cur = o
	}
	if c.MustNotExist && cur != nil {
		return &result{prev: cur, err: fmt.Errorf("%s %s: %w", c.Kind, displayKey(c), ErrExists)}, nil
	}
	if c.Version != 0 {
		switch {
		case cur == nil:
			return &result{err: fmt.Errorf("%s %s: expected version %d, found none: %w", c.Kind, displayKey(c), c.Version, ErrConflict)}, nil
		case cur.GetMetadata().Version != c.Version:
			return &result{prev: cur, err: fmt.Errorf("%s %s: expected version %d, found %d: %w",
				c.Kind, displayKey(c), c.Version, cur.GetMetadata().Version, ErrConflict)}, nil
		}
	}
	if err := checkRequires(b, c); err != nil {
		return &result{prev: cur, err: err}, nil
	}
	r := &result{}
	var obj legion.Object
	switch c.Op {
	case opDelete:
		if cur == nil {
			return &result{err: fmt.Errorf("%s %s: %w", c.Kind, displayKey(c), ErrNotFound)}, nil
		}
		b.del(key)
		cur.GetMetadata().Version = index
		r.obj = cur
		return r, &Event{Type: Deleted, Version: index, Object: cur, memo: &memo{}}
	case opStatus:
		if cur == nil {
			return &result{err: fmt.Errorf("%s %s: status write: %w", c.Kind, displayKey(c), ErrNotFound)}, nil
		}
		// Only the command's status counts: the rest of it is not decoded.
		if err := decodeStatus(c.Object, cur.StatusPtr()); err != nil {
			return &result{err: fmt.Errorf("decoding %s status: %w", c.Kind, err)}, nil
		}
		obj = cur
	case opPut:
		in, err := legion.FromJSONAs(c.Kind, c.Object)
		if err != nil {
			return &result{err: err}, nil
		}
		if c.KeepStatus && cur != nil {
			if err := copyPart(in.StatusPtr(), cur.StatusPtr()); err != nil {
				return &result{err: err}, nil
			}
		}
		r.prev, obj = cur, in
	default:
		return &result{err: fmt.Errorf("unknown command %q", c.Op)}, nil
	}
	m := obj.GetMetadata()
	m.Name, m.Namespace = c.Name, c.Namespace
	m.Version = index
	if cur == nil {
		m.UID = uidFromIndex(index)
		m.Generation = 1
	} else if obj != cur {
		pm := cur.GetMetadata()
		m.UID = pm.UID
		m.Generation = pm.Generation
		if !sameJSON(obj.SpecPtr(), cur.SpecPtr()) {
			m.Generation++
		}
	}
	var data []byte
	if c.Op == opPut && !(c.KeepStatus && cur != nil) {
		data = withMetadata(c.Object, m)
	}
	if data == nil {
		var err error
		if data, err = legion.MarshalJSON(obj); err != nil {
			return &result{err: err}, nil
		}
	}
	b.put(key, data)
	t := Added
	if prevRaw != nil {
		t = Modified
	}
	// obj, made here from the command's bytes, goes to the watchers; the
	// writer gets its own copy, decoded from data on its own goroutine
	// (result.object).
	r.kind, r.data, r.version, r.uid, r.generation = c.Kind, data, m.Version, m.UID, m.Generation
	return r, &Event{Type: t, Version: index, Object: obj, memo: &memo{}, stored: data}
}

// withMetadata is what a put stores of the object it decoded from its
// command's bytes (data) once its metadata is m: data, with its metadata
// replaced. Encoding the whole object again was a quarter of the state
// machine's time, on every replica. Decoding the result gives the object
// the put hands its watchers, and where encoding the decoded object
// gives data again (the writer made data with legion.MarshalJSON) the
// result is what that encoding wrote, since encoding/json writes a
// field's value as it writes the value alone
// (TestPutStoresTheObjectItDecoded). Nil when data has no metadata
// member where MarshalJSON puts it (the caller encodes the object).
func withMetadata(data []byte, m *legion.Metadata) []byte {
	meta, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	d := headDecoder(data)
	defer headDecoders.Put(d)
	if enterObject(d) != nil {
		return nil
	}
	// MarshalJSON writes the header's members first: apiVersion, kind,
	// metadata.
	if ok, err := findMember(d, `"metadata"`, 3); !ok || err != nil {
		return nil
	}
	v, err := d.ReadValue()
	if err != nil {
		return nil
	}
	end := int(d.InputOffset())
	start := end - len(v)
	out := make([]byte, 0, len(data)-len(v)+len(meta))
	return append(append(append(out, data[:start]...), meta...), data[end:]...)
}

// decodeStatus decodes only the status of an object's JSON into dst (the
// status of the object written, nil for a kind without one), replacing
// what dst held (replacePart).
func decodeStatus(data []byte, dst any) error {
	if dst == nil {
		return nil
	}
	var part struct {
		Status json.RawMessage `json:"status"`
	}
	if err := jsonfast.Unmarshal(data, &part); err != nil {
		return err
	}
	return replacePart(dst, part.Status)
}

func displayKey(c *command) string { return displayName(c.Namespace, c.Name) }

// displayName is an object's name as messages give it: namespace/name,
// or the name alone for a cluster-scoped kind.
func displayName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
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
	return replacePart(dst, data)
}

// replacePart makes dst (a spec or status pointer) what data, its JSON,
// says: replaced, not merged, so fields data leaves out (false, empty,
// omitted) do not keep dst's old values. No data leaves it zero.
func replacePart(dst any, data []byte) error {
	v := reflect.ValueOf(dst).Elem()
	v.Set(reflect.Zero(v.Type()))
	if len(data) == 0 {
		return nil
	}
	return jsonfast.Unmarshal(data, dst)
}

// snapshotData is a snapshot's content: the objects as JSON and the index
// they were read at.
type snapshotData struct {
	Index   uint64            `json:"index"`
	Objects []json.RawMessage `json:"objects"`
}

// Snapshot writes the pending changes to the file first: raft compacts
// its log up to the snapshot and, with the state machine persistent,
// never restores it at start, so the file must hold at least as much.
// Raft calls it between applies, so nothing is pending after the flush.
//
// It runs on raft's apply goroutine, which every write waits for, so it
// only opens a read of the file: bbolt keeps a read at the state it began
// with, and Persist copies the objects from it while writes go on
// (copying them here held every write for 0.5-1 s at 200,000 objects).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.flush(); err != nil {
		return nil, fmt.Errorf("writing pending changes before a snapshot: %w", err)
	}
	v, tx, applied, err := f.begin()
	if err != nil {
		return nil, fmt.Errorf("reading objects for a snapshot: %w", err)
	}
	if len(v.deltas) > 0 || applied != v.applied {
		// Only a test holding changes back leaves them pending; raft
		// tries again at its next interval.
		tx.Rollback()
		return nil, fmt.Errorf("reading objects for a snapshot: changes still pending after writing them: the file is at %d, the state machine at %d", applied, v.applied)
	}
	return &fileSnapshot{tx: tx, index: applied, seal: f.seal}, nil
}

// fileSnapshot is the objects of the file as a read begun between
// applies sees them, at index.
type fileSnapshot struct {
	tx    *bolt.Tx
	index uint64
	seal  *sealer
	once  sync.Once
}

// Persist writes what snapshotData's encoding writes, one object at a
// time, and ends the read before the sink stores the snapshot: that
// write may grow the file, and growing it waits for every read.
func (s *fileSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.write(sink)
	s.Release()
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fileSnapshot) write(sink io.Writer) error {
	w := bufio.NewWriterSize(sink, 64<<10)
	fmt.Fprintf(w, `{"index":%d,"objects":[`, s.index)
	first := true
	c := s.tx.Bucket(bucketObjects).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		// A sealed value opens only as it was written: the JSON the state
		// machine stored.
		plain, err := s.seal.open(tableObjects, k, v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if !first {
			w.WriteByte(',')
		}
		first = false
		w.Write(plain)
	}
	w.WriteString("]}\n")
	return w.Flush()
}

// Release ends the read (Persist already has, unless it never ran).
func (s *fileSnapshot) Release() { s.once.Do(func() { s.tx.Rollback() }) }

// Restore replaces every object with a snapshot's, in one transaction,
// and ends open watches with ErrReset.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s snapshotData
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("decoding snapshot: %w", err)
	}
	// Readers wait for the new view: none mixes the old deltas with the
	// new file.
	f.restoreMu.Lock()
	defer f.restoreMu.Unlock()
	err := f.commit.update(func(tx *bolt.Tx) error {
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
			key := []byte(legion.ObjectKey(o))
			if err := b.Put(key, f.seal.seal(tableObjects, key, raw)); err != nil {
				return err
			}
		}
		return f.putApplied(tx, s.Index)
	})
	if err != nil {
		return fmt.Errorf("restoring snapshot at %d: %w", s.Index, err)
	}
	f.mu.Lock()
	f.cur.Store(&view{gen: f.cur.Load().gen + 1, applied: s.Index})
	f.mu.Unlock()
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
