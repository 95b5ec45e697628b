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
	seal *sealer
}

var (
	_ raft.LogStore          = (*logStore)(nil)
	_ raft.StableStore       = (*logStore)(nil)
	_ raft.MonotonicLogStore = (*logStore)(nil)
)

func (s *logStore) FirstIndex() (uint64, error)       { return s.wal.FirstIndex() }
func (s *logStore) LastIndex() (uint64, error)        { return s.wal.LastIndex() }
func (s *logStore) StoreLog(log *raft.Log) error      { return s.StoreLogs([]*raft.Log{log}) }
func (s *logStore) DeleteRange(min, max uint64) error { return s.wal.DeleteRange(min, max) }
func (s *logStore) IsMonotonic() bool                 { return true }

// logSealed flags a sealed entry in its type: its Data holds its data
// and extensions sealed together (logs from raft use types below 16).
const logSealed raft.LogType = 0x80

func (s *logStore) GetLog(index uint64, log *raft.Log) error {
	if err := s.wal.GetLog(index, log); err != nil {
		return err
	}
	if log.Type&logSealed == 0 {
		return nil
	}
	plain, err := s.seal.open(tableLog, u64(index), log.Data)
	if err != nil {
		return fmt.Errorf("raft log: entry %d: %w", index, err)
	}
	if len(plain) < 4 || int(binary.BigEndian.Uint32(plain)) > len(plain)-4 {
		return fmt.Errorf("raft log: entry %d: sealed contents cut short", index)
	}
	n := binary.BigEndian.Uint32(plain)
	log.Type &^= logSealed
	log.Data = plain[4 : 4+n]
	log.Extensions = nil
	if ext := plain[4+n:]; len(ext) > 0 {
		log.Extensions = ext
	}
	return nil
}

// StoreLogs seals copies of the entries: raft keeps using its own.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	if s.seal == nil {
		return s.wal.StoreLogs(logs)
	}
	out := make([]*raft.Log, len(logs))
	copies := make([]raft.Log, len(logs))
	var plain []byte // seal copies it: one buffer serves every entry
	for i, l := range logs {
		plain = binary.BigEndian.AppendUint32(plain[:0], uint32(len(l.Data)))
		plain = append(plain, l.Data...)
		plain = append(plain, l.Extensions...)
		c := &copies[i]
		*c = *l
		c.Type |= logSealed
		c.Data = s.seal.seal(tableLog, u64(l.Index), plain)
		c.Extensions = nil
		out[i] = c
	}
	return s.wal.StoreLogs(out)
}

func (s *logStore) Set(key, val []byte) error {
	return s.vote.set(key, s.seal.seal(tableVote, key, val))
}

// errKeyNotFound is what raft expects for a missing stable key: it
// compares the message.
var errKeyNotFound = errors.New("not found")

func (s *logStore) Get(key []byte) ([]byte, error) {
	v, ok := s.vote.get(key)
	if !ok {
		return nil, errKeyNotFound
	}
	return s.seal.open(tableVote, key, v)
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
	return appendLog(make([]byte, 0, encodedLogLen(l)), l)
}

// encodedLogLen is how many bytes encodeLog makes of l.
func encodedLogLen(l *raft.Log) int { return 8 + 1 + 8 + 4 + len(l.Data) + 4 + len(l.Extensions) }

// appendLog appends encodeLog(l) to b.
func appendLog(b []byte, l *raft.Log) []byte {
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
