package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// logStore is raft's LogStore (the segment files of walLog) and its
// StableStore (term and vote, in a file beside them: see voteFile).
type logStore struct {
	wal  *walLog
	vote *voteFile
}

var (
	_ raft.LogStore          = (*logStore)(nil)
	_ raft.StableStore       = (*logStore)(nil)
	_ raft.MonotonicLogStore = (*logStore)(nil)
)

func (s *logStore) FirstIndex() (uint64, error)              { return s.wal.FirstIndex() }
func (s *logStore) LastIndex() (uint64, error)               { return s.wal.LastIndex() }
func (s *logStore) GetLog(index uint64, log *raft.Log) error { return s.wal.GetLog(index, log) }
func (s *logStore) StoreLog(log *raft.Log) error             { return s.wal.StoreLogs([]*raft.Log{log}) }
func (s *logStore) StoreLogs(logs []*raft.Log) error         { return s.wal.StoreLogs(logs) }
func (s *logStore) DeleteRange(min, max uint64) error        { return s.wal.DeleteRange(min, max) }
func (s *logStore) IsMonotonic() bool                        { return true }

func (s *logStore) Set(key, val []byte) error { return s.vote.set(key, val) }

// errKeyNotFound is what raft expects for a missing stable key: it
// compares the message.
var errKeyNotFound = errors.New("not found")

func (s *logStore) Get(key []byte) ([]byte, error) {
	v, ok := s.vote.get(key)
	if !ok {
		return nil, errKeyNotFound
	}
	return v, nil
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
