package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// logStore is raft's LogStore and StableStore on the shared bbolt file.
// Every StoreLogs call is one fsynced transaction, so raft's batching of
// appends turns into one disk sync per batch.
type logStore struct {
	db     *bolt.DB
	commit *committer
}

var (
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

func (s *logStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLog).Cursor().First(); k != nil {
			idx = readU64(k)
		}
		return nil
	})
	return idx, err
}

func (s *logStore) LastIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLog).Cursor().Last(); k != nil {
			idx = readU64(k)
		}
		return nil
	})
	return idx, err
}

func (s *logStore) GetLog(index uint64, log *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLog).Get(u64(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(v, index, log)
	})
}

func (s *logStore) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

func (s *logStore) StoreLogs(logs []*raft.Log) error {
	// May share a transaction with a state machine apply running at the
	// same time (see committer).
	return s.commit.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLog)
		for _, l := range logs {
			if err := b.Put(u64(l.Index), encodeLog(l)); err != nil {
				return fmt.Errorf("storing log entry %d: %w", l.Index, err)
			}
		}
		return nil
	})
}

func (s *logStore) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		for k, _ := c.Seek(u64(min)); k != nil && readU64(k) <= max; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *logStore) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketStable).Put(key, val) })
}

// errKeyNotFound is what raft expects for a missing stable key: it
// compares the message.
var errKeyNotFound = errors.New("not found")

func (s *logStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return errKeyNotFound
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

func (s *logStore) SetUint64(key []byte, val uint64) error { return s.Set(key, u64(val)) }

func (s *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	return readU64(v), nil
}

// A log entry on disk: term, type, appended-at (unix ns), then data and
// extensions each preceded by a 4-byte length.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 8+1+8+4+len(l.Data)+4+len(l.Extensions))
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return b
}

func decodeLog(b []byte, index uint64, l *raft.Log) error {
	bad := fmt.Errorf("log entry %d: truncated record of %d bytes", index, len(b))
	if len(b) < 21 {
		return bad
	}
	l.Index = index
	l.Term = binary.BigEndian.Uint64(b)
	l.Type = raft.LogType(b[8])
	if at := int64(binary.BigEndian.Uint64(b[9:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	} else {
		l.AppendedAt = time.Time{}
	}
	n := int(binary.BigEndian.Uint32(b[17:]))
	b = b[21:]
	if len(b) < n+4 {
		return bad
	}
	l.Data = bytes.Clone(b[:n])
	b = b[n:]
	m := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if len(b) < m {
		return bad
	}
	l.Extensions = nil
	if m > 0 {
		l.Extensions = bytes.Clone(b[:m])
	}
	return nil
}
