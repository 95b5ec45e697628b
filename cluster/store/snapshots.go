package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// snapshotStore keeps the one current snapshot in the shared bbolt file
// (the object set as JSON, and its meta beside it). Snapshots are small:
// they are the objects.
type snapshotStore struct {
	db   *bolt.DB
	seal *sealer
}

var (
	keySnapMeta = []byte("meta")
	// keySnapData held the whole of a snapshot before it was kept in
	// parts; a file from then is still read.
	keySnapData = []byte("data")
)

// A snapshot's data is kept in parts of snapPart bytes, under
// snapPartPrefix and the part's number. bbolt keeps a value in one run
// of pages: one value of a few hundred MiB needed a new run at the
// file's end whenever the runs the last snapshot freed had been cut up
// by the writes between, and the file grew by a snapshot each time.
const snapPart = 1 << 20

var snapPartPrefix = []byte("data/")

func snapPartKey(i int) []byte { return fmt.Appendf(bytes.Clone(snapPartPrefix), "%08d", i) }

var _ raft.SnapshotStore = (*snapshotStore)(nil)

func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	meta := raft.SnapshotMeta{
		Version:            version,
		ID:                 fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli()),
		Index:              index,
		Term:               term,
		Configuration:      configuration,
		ConfigurationIndex: configurationIndex,
	}
	return &snapshotSink{store: s, meta: meta}, nil
}

func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	meta, err := s.meta()
	if err != nil || meta == nil {
		return nil, err
	}
	return []*raft.SnapshotMeta{meta}, nil
}

func (s *snapshotStore) meta() (*raft.SnapshotMeta, error) {
	var meta *raft.SnapshotMeta
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		meta, err = s.metaIn(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading snapshot meta: %w", err)
	}
	return meta, nil
}

// metaIn reads the meta of the snapshot held in tx, nil when none is.
func (s *snapshotStore) metaIn(tx *bolt.Tx) (*raft.SnapshotMeta, error) {
	v := tx.Bucket(bucketSnapshots).Get(keySnapMeta)
	if v == nil {
		return nil, nil
	}
	v, err := s.seal.open(tableSnapshots, keySnapMeta, v)
	if err != nil {
		return nil, err
	}
	meta := new(raft.SnapshotMeta)
	if err := json.Unmarshal(v, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

// Open checks that id is the snapshot held and returns its meta; its data
// is read from the file at the first Read (snapshotReader).
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, err := s.meta()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if meta == nil {
		return nil, nil, fmt.Errorf("snapshot %s: none held", id)
	}
	if meta.ID != id {
		return nil, nil, fmt.Errorf("snapshot %s: not held (the current one is %s)", id, meta.ID)
	}
	return meta, &snapshotReader{load: func() ([]byte, error) { return s.data(id) }}, nil
}

// data reads the data of snapshot id, an error when another replaced it.
func (s *snapshotStore) data(id string) ([]byte, error) {
	var data []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		meta, err := s.metaIn(tx)
		switch {
		case err != nil:
			return fmt.Errorf("snapshot %s: %w", id, err)
		case meta == nil:
			return fmt.Errorf("snapshot %s: none held", id)
		case meta.ID != id:
			return fmt.Errorf("snapshot %s: replaced by %s since it was opened", id, meta.ID)
		}
		if old := b.Get(keySnapData); old != nil {
			d, err := s.seal.open(tableSnapshots, keySnapData, old)
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", id, err)
			}
			data = bytes.Clone(d)
			return nil
		}
		data = make([]byte, 0, meta.Size)
		c := b.Cursor()
		for k, v := c.Seek(snapPartPrefix); k != nil && bytes.HasPrefix(k, snapPartPrefix); k, v = c.Next() {
			d, err := s.seal.open(tableSnapshots, k, v)
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", id, err)
			}
			data = append(data, d...)
		}
		if int64(len(data)) != meta.Size {
			return fmt.Errorf("snapshot %s: %d bytes held of %d", id, len(data), meta.Size)
		}
		return nil
	})
	return data, err
}

// snapshotReader is a snapshot's data, read from the file at the first
// Read. Raft opens the snapshot it sends a follower before it reaches
// the follower: read at Open, a follower that is down cost a read and
// unsealing of the whole snapshot at each try, every few seconds for as
// long as it stayed down.
type snapshotReader struct {
	load func() ([]byte, error)
	r    *bytes.Reader
	err  error
}

func (r *snapshotReader) Read(p []byte) (int, error) {
	if r.r == nil && r.err == nil {
		data, err := r.load()
		r.r, r.err = bytes.NewReader(data), err
	}
	if r.err != nil {
		return 0, r.err
	}
	return r.r.Read(p)
}

func (r *snapshotReader) Close() error { return nil }

// snapshotSink gathers a snapshot in memory and writes it in one
// transaction on Close, replacing the previous one.
type snapshotSink struct {
	store *snapshotStore
	meta  raft.SnapshotMeta
	buf   bytes.Buffer
	done  bool
}

func (s *snapshotSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *snapshotSink) ID() string                  { return s.meta.ID }

func (s *snapshotSink) Cancel() error {
	s.done = true
	return nil
}

func (s *snapshotSink) Close() error {
	if s.done {
		return nil
	}
	s.done = true
	s.meta.Size = int64(s.buf.Len())
	meta, err := json.Marshal(&s.meta)
	if err != nil {
		return err
	}
	return s.store.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		seal := s.store.seal
		if err := b.Put(keySnapMeta, seal.seal(tableSnapshots, keySnapMeta, meta)); err != nil {
			return err
		}
		// The previous snapshot's data goes: a whole one from before
		// parts, and every part (a smaller snapshot has fewer).
		if err := b.Delete(keySnapData); err != nil {
			return err
		}
		var old [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(snapPartPrefix); k != nil && bytes.HasPrefix(k, snapPartPrefix); k, _ = c.Next() {
			old = append(old, bytes.Clone(k))
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		data := s.buf.Bytes()
		for i := 0; len(data) > 0; i++ {
			part := data[:min(len(data), snapPart)]
			data = data[len(part):]
			k := snapPartKey(i)
			if err := b.Put(k, seal.seal(tableSnapshots, k, part)); err != nil {
				return err
			}
		}
		return nil
	})
}
