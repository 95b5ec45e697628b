package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// voteFile is raft's stable store: the current term and the last vote.
//
// They live in a small file of their own in the log's directory, not in
// store.db. A replica that forgets its term or vote may vote twice in one
// term and so help elect two leaders; store.db can be lost or damaged on
// its own (and is then removed or replaced from a backup), while the log
// and these values only make sense together, so they are kept together.
// The file holds two fixed slots written in turn, each a sequence number,
// the values and a CRC-32C: a write torn by a crash leaves the other slot,
// and rewriting blocks the file already has needs no free space, so an
// election still works on a full disk.
type voteFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	seq  uint64
	vals map[string][]byte
}

const (
	voteFileName = "vote"
	voteSlot     = 4096 // each slot is one block of its own
)

// openVoteFile opens (or creates) the file in the log directory dir. A new
// file takes the values kept in store.db's stable bucket before they had
// a file of their own.
func openVoteFile(dir string, db *bolt.DB) (v *voteFile, fresh bool, err error) {
	path := filepath.Join(dir, voteFileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return createVoteFile(path, db)
	}
	if err != nil {
		return nil, false, fmt.Errorf("term and vote: %w", err)
	}
	v = &voteFile{path: path, f: f}
	buf := make([]byte, 2*voteSlot)
	n, _ := f.ReadAt(buf, 0)
	found := false
	for i := range 2 {
		seq, vals, ok := decodeVoteSlot(buf[min(n, i*voteSlot):min(n, (i+1)*voteSlot)])
		if ok && (!found || seq > v.seq) {
			v.seq, v.vals, found = seq, vals, true
		}
	}
	if !found {
		f.Close()
		return nil, false, fmt.Errorf("term and vote: %s: neither copy is whole (damaged); %s", path, boltDamageHelp)
	}
	return v, false, nil
}

func createVoteFile(path string, db *bolt.DB) (*voteFile, bool, error) {
	vals := map[string][]byte{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).ForEach(func(k, val []byte) error {
			vals[string(k)] = bytes.Clone(val)
			return nil
		})
	})
	if err != nil {
		return nil, false, fmt.Errorf("term and vote: reading them from store.db: %w", err)
	}
	// Written whole under another name first, so a crash leaves either
	// no file or a whole one.
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("term and vote: %w", err)
	}
	v := &voteFile{path: path, f: f, vals: vals}
	if err := f.Truncate(2 * voteSlot); err == nil {
		err = v.write()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("term and vote: creating %s: %w", path, err)
	}
	return v, len(vals) == 0, nil
}

// A slot: its length (4 bytes), its CRC-32C (4), then the sequence number
// (8) and each key and value, each preceded by its 2-byte length.
func encodeVoteSlot(seq uint64, vals map[string][]byte) ([]byte, error) {
	b := make([]byte, 8, voteSlot)
	b = binary.BigEndian.AppendUint64(b, seq)
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(vals[k])))
		b = append(b, vals[k]...)
	}
	if len(b) > voteSlot {
		return nil, fmt.Errorf("term and vote: %d bytes, at most %d fit", len(b), voteSlot)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-8))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], crcTable))
	return b, nil
}

func decodeVoteSlot(b []byte) (uint64, map[string][]byte, bool) {
	if len(b) < 16 {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 8 || n > len(b)-8 || crc32.Checksum(b[8:8+n], crcTable) != binary.BigEndian.Uint32(b[4:]) {
		return 0, nil, false
	}
	p := b[8 : 8+n]
	seq := binary.BigEndian.Uint64(p)
	p = p[8:]
	vals := map[string][]byte{}
	for len(p) > 0 {
		if len(p) < 2 {
			return 0, nil, false
		}
		kl := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+kl+2 {
			return 0, nil, false
		}
		k := string(p[2 : 2+kl])
		p = p[2+kl:]
		vl := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+vl {
			return 0, nil, false
		}
		vals[k] = bytes.Clone(p[2 : 2+vl])
		p = p[2+vl:]
	}
	return seq, vals, true
}

// write puts the values in the slot after the current one's, durably.
func (v *voteFile) write() error {
	b, err := encodeVoteSlot(v.seq+1, v.vals)
	if err != nil {
		return err
	}
	if _, err := v.f.WriteAt(b, int64((v.seq+1)%2)*voteSlot); err != nil {
		return fmt.Errorf("term and vote: writing %s: %w", v.path, err)
	}
	if err := datasync(v.f); err != nil {
		return fmt.Errorf("term and vote: syncing %s: %w", v.path, err)
	}
	v.seq++
	return nil
}

func (v *voteFile) set(key, val []byte) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, had := v.vals[string(key)]
	v.vals[string(key)] = bytes.Clone(val)
	if err := v.write(); err != nil {
		if had {
			v.vals[string(key)] = old
		} else {
			delete(v.vals, string(key))
		}
		return err
	}
	return nil
}

func (v *voteFile) get(key []byte) ([]byte, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	val, ok := v.vals[string(key)]
	return bytes.Clone(val), ok
}

func (v *voteFile) close() error { return v.f.Close() }
