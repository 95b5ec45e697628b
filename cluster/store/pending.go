package store

import (
	"bytes"
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The state machine's changes reach the file after the client has its
// answer, so a write costs the log's fdatasync only (as etcd does):
// applies change memory (pending deltas over the file), and the flusher
// writes them shortly after (Store.flusher), many applies in one bbolt
// commit; any other commit the committer makes (a snapshot install)
// carries them too. Objects and the applied index are still written
// together, so the file always holds the state at one index; the Raft
// log, fsynced on a quorum before any client hears of a write, holds
// every entry after it, and raft applies those again after a crash
// (entries at or below the file's index are skipped). Reads see the
// pending deltas on top of the file, so every applied write is visible.
// A snapshot writes them first (fsm.Snapshot), since raft compacts the
// log behind it.

// delta is what one apply batch changed: key -> object JSON, nil for a
// deleted key. It is never changed once published.
type delta struct {
	objects map[string][]byte
	applied uint64 // the last index the batch applied
	// kinds are the kinds of the keys in objects (a few at most), so a
	// scan of one kind passes over the deltas holding none of it.
	kinds []string
	// keys tells the keys objects surely lacks.
	keys keyFilter
}

// keyFilter is a small Bloom filter of a delta's keys (two bits a key in
// 2,048). With thousands of writes a second dozens of deltas are pending,
// and a read of a key none of them holds (every create reads one, in
// admission and in the state machine) passed over each with a map
// lookup; two bit tests each cost a tenth of that.
type keyFilter [32]uint64

// keySeed seeds the filters' hash: any seed will do, the filters live in
// memory only.
var keySeed = maphash.MakeSeed()

func keyHash(key []byte) uint64 { return maphash.Bytes(keySeed, key) }

func (f *keyFilter) add(h uint64) {
	for _, b := range [2]uint64{h & 2047, h >> 11 & 2047} {
		f[b>>6] |= 1 << (b & 63)
	}
}

// mayHold is false when the key of hash h was never added.
func (f *keyFilter) mayHold(h uint64) bool {
	for _, b := range [2]uint64{h & 2047, h >> 11 & 2047} {
		if f[b>>6]&(1<<(b&63)) == 0 {
			return false
		}
	}
	return true
}

// holds reports whether the delta may hold keys starting with prefix.
func (d *delta) holds(prefix string) bool {
	kind, _, ok := strings.Cut(prefix, "/")
	return !ok || slices.Contains(d.kinds, kind)
}

// view is the state machine as readers see it: the file plus the deltas
// not yet in it. A view is never changed once published; applies, flushes
// and snapshot installs publish new ones.
type view struct {
	gen     uint64   // bumped by a snapshot install
	deltas  []*delta // oldest first
	applied uint64   // the index this view is at
}

// reader is a consistent read of the state machine: a view and a read
// transaction on the file that the view's deltas complete.
type reader struct {
	v    *view
	tx   *bolt.Tx
	seal *sealer
	err  error // the first value of the file that failed to open
}

// file opens a value read from the file's objects. One that fails to
// open is returned as it is, which no caller takes for an object, and
// its error ends the read.
func (r *reader) file(key, val []byte) []byte {
	if val == nil {
		return nil
	}
	plain, err := r.seal.open(tableObjects, key, val)
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return val
	}
	return plain
}

// read runs fn on a consistent reader. The file's applied index must not
// be beyond the view's (a flush of newer deltas landed between loading
// the view and opening the transaction): then it takes both again. Any
// file state from before the view's first delta up to the view is fine,
// since the deltas rewrite every key they touch.
func (f *fsm) read(fn func(*reader) error) error {
	for {
		v, tx, applied, err := f.begin()
		if err != nil {
			return err
		}
		if applied > v.applied {
			tx.Rollback()
			continue
		}
		r := &reader{v: v, tx: tx, seal: f.seal}
		err = fn(r)
		tx.Rollback()
		if r.err != nil {
			err = r.err // the cause of whatever fn made of the value
		}
		return err
	}
}

// begin loads the current view and opens a read of the file, with the
// index the file is at; the caller ends the read.
func (f *fsm) begin() (*view, *bolt.Tx, uint64, error) {
	f.restoreMu.RLock()
	v := f.cur.Load()
	tx, err := f.db.Begin(false)
	f.restoreMu.RUnlock()
	if err != nil {
		return nil, nil, 0, err
	}
	applied, err := f.readApplied(tx)
	if err != nil {
		tx.Rollback()
		return nil, nil, 0, err
	}
	return v, tx, applied, nil
}

// get returns an object's JSON, nil when there is none. The slice is
// valid until the read ends.
func (r *reader) get(key []byte) []byte {
	if len(r.v.deltas) > 0 {
		h := keyHash(key)
		for i := len(r.v.deltas) - 1; i >= 0; i-- {
			d := r.v.deltas[i]
			if !d.keys.mayHold(h) {
				continue
			}
			if val, ok := d.objects[string(key)]; ok {
				return val
			}
		}
	}
	return r.file(key, r.tx.Bucket(bucketObjects).Get(key))
}

// scan calls fn for every object whose key starts with prefix, in key
// order. The slices are valid until the read ends.
func (r *reader) scan(prefix []byte, fn func(k, v []byte) error) error {
	return r.walk(prefix, true, fn)
}

// walk is scan; without values, fn gets none (nil), and the file's
// values are not opened.
func (r *reader) walk(prefix []byte, values bool, fn func(k, v []byte) error) error {
	var over map[string][]byte
	for _, d := range r.v.deltas {
		if !d.holds(string(prefix)) {
			continue
		}
		for k, val := range d.objects {
			if strings.HasPrefix(k, string(prefix)) {
				if over == nil {
					over = map[string][]byte{}
				}
				over[k] = val
			}
		}
	}
	keys := slices.Sorted(maps.Keys(over))
	c := r.tx.Bucket(bucketObjects).Cursor()
	k, v := c.Seek(prefix)
	for i := 0; ; {
		inFile := k != nil && bytes.HasPrefix(k, prefix)
		switch {
		case i < len(keys) && (!inFile || keys[i] <= string(k)):
			if inFile && keys[i] == string(k) {
				k, v = c.Next()
			}
			if val := over[keys[i]]; val != nil {
				if !values {
					val = nil
				}
				if err := fn([]byte(keys[i]), val); err != nil {
					return err
				}
			}
			i++
		case inFile:
			var val []byte
			if values {
				val = r.file(k, v)
			}
			if err := fn(k, val); err != nil {
				return err
			}
			k, v = c.Next()
		default:
			return nil
		}
	}
}

// batchWriter is what one apply batch reads and writes: its own changes
// over a reader.
type batchWriter struct {
	r *reader
	d *delta // what the batch changed, published once it is applied
}

func (w *batchWriter) get(key []byte) []byte {
	if val, ok := w.d.objects[string(key)]; ok {
		return val
	}
	return w.r.get(key)
}

func (w *batchWriter) put(key, val []byte) { w.set(key, val) }
func (w *batchWriter) del(key []byte)      { w.set(key, nil) }

func (w *batchWriter) set(key, val []byte) {
	w.d.objects[string(key)] = val
	w.d.keys.add(keyHash(key))
	kind, _, _ := strings.Cut(string(key), "/")
	if !slices.Contains(w.d.kinds, kind) {
		w.d.kinds = append(w.d.kinds, kind)
	}
}

// publish makes an apply batch's changes visible to readers.
func (f *fsm) publish(d *delta) {
	f.mu.Lock()
	cur := f.cur.Load()
	f.cur.Store(&view{gen: cur.gen, deltas: append(slices.Clip(cur.deltas), d), applied: d.applied})
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pendingDeltas is how many published deltas are not in the file yet.
func (f *fsm) pendingDeltas() int { return len(f.cur.Load().deltas) }

// The file's applied index (the state machine's may be ahead).
func (f *fsm) fileApplied() (uint64, error) {
	var p uint64
	err := f.db.View(func(tx *bolt.Tx) error {
		var err error
		p, err = f.readApplied(tx)
		return err
	})
	return p, err
}

// readApplied is the index the file's objects are at.
func (f *fsm) readApplied(tx *bolt.Tx) (uint64, error) {
	if tx.Writable() {
		// Its ID is that of a commit not made yet, which a rollback
		// leaves to the next writer: nothing to cache by.
		return readApplied(tx, f.seal)
	}
	if a := f.appliedRead.Load(); a != nil && a.txid == tx.ID() {
		return a.applied, nil
	}
	applied, err := readApplied(tx, f.seal)
	if err == nil {
		f.appliedRead.Store(&appliedAt{txid: tx.ID(), applied: applied})
	}
	return applied, err
}

func readApplied(tx *bolt.Tx, s *sealer) (uint64, error) {
	v, err := s.open(tableMeta, keyApplied, tx.Bucket(bucketMeta).Get(keyApplied))
	if err != nil {
		return 0, err
	}
	return readU64(v), nil
}

// putApplied writes the index the file's objects are at.
func (f *fsm) putApplied(tx *bolt.Tx, index uint64) error {
	return tx.Bucket(bucketMeta).Put(keyApplied, f.seal.seal(tableMeta, keyApplied, u64(index)))
}

// persist writes the pending deltas and their applied index into tx (the
// committer calls it in every transaction it makes) and returns what to
// run once tx is committed: dropping them from memory.
func (f *fsm) persist(tx *bolt.Tx) (func(), error) {
	v := f.cur.Load()
	if len(v.deltas) == 0 || f.hold.Load() {
		return nil, nil
	}
	objs := tx.Bucket(bucketObjects)
	for _, d := range v.deltas {
		for k, val := range d.objects {
			var err error
			if val == nil {
				err = objs.Delete([]byte(k))
			} else {
				err = objs.Put([]byte(k), f.seal.seal(tableObjects, []byte(k), val))
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if err := f.putApplied(tx, v.applied); err != nil {
		return nil, err
	}
	return func() { f.trim(v) }, nil
}

// trim drops the deltas of v, now in the file, from the current view.
func (f *fsm) trim(v *view) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.cur.Load()
	if cur.gen != v.gen {
		return // a snapshot install replaced them
	}
	i := slices.Index(cur.deltas, v.deltas[len(v.deltas)-1])
	if i < 0 {
		return
	}
	f.cur.Store(&view{gen: cur.gen, deltas: slices.Clone(cur.deltas[i+1:]), applied: cur.applied})
}

// flush writes the pending deltas now, in a transaction of their own
// unless they can share one already being made.
func (f *fsm) flush() error {
	if f.pendingDeltas() == 0 {
		return nil
	}
	return f.commit.update(func(*bolt.Tx) error { return nil })
}
