package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// The buckets of a manager's one bbolt file.
var (
	bucketLog       = []byte("log")       // before the log had its own files: moved to them at open
	bucketStable    = []byte("stable")    // raft's stable store: term, vote, ...
	bucketObjects   = []byte("objects")   // Kind/namespace/name -> object JSON
	bucketMeta      = []byte("meta")      // applied index
	bucketSnapshots = []byte("snapshots") // the current snapshot: meta and data

	// The tables values are sealed for (the associated data's first part).
	tableObjects   = "objects"
	tableMeta      = "meta"
	tableSnapshots = "snapshots"
	tableLog       = "raft-log"
	tableVote      = "vote"
)

var keyApplied = []byte("applied")

// initialMmapSize is address space only (the file grows as it needs).
const initialMmapSize = 256 << 20

// FileName is the store's file inside a manager's data directory.
const FileName = "store.db"

// LogDir is the directory of the Raft log's segments inside a manager's
// data directory.
const LogDir = "raft-log"

// boltDamageHelp is what to do about a damaged store file.
const boltDamageHelp = "restore this manager from a backup, or remove its data directory and join it to the cluster again from empty"

func openBolt(path string) (*bolt.DB, error) {
	if err := checkBolt(path); err != nil {
		return nil, err
	}
	// A short lock timeout: a second daemon on the same directory gets a
	// clear error instead of waiting forever. The free list is not written
	// at each commit (bbolt rebuilds it when it opens the file, as etcd
	// does): that halves what a commit writes and nearly doubles fsynced
	// writes per second. The map is made large at once: growing it makes
	// a commit wait for every open read, and new reads wait for it.
	db, err := safeBolt(path, &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType,
		NoFreelistSync: true, InitialMmapSize: initialMmapSize})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLog, bucketStable, bucketObjects, bucketMeta, bucketSnapshots} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("preparing %s: %w", path, err)
	}
	return db, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func readU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// moveBoltLog moves the entries of a log kept in the bbolt file (as
// stores made before the log had its own files did) to the segment files,
// once, the first time such a store opens.
func moveBoltLog(db *bolt.DB, wal *walLog) error {
	var logs []*raft.Log
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLog).ForEach(func(k, v []byte) error {
			l := new(raft.Log)
			if err := decodeLog(v, readU64(k), l); err != nil {
				return err
			}
			// After a gap (left by a snapshot install) only the entries
			// after it count.
			if n := len(logs); n > 0 && logs[n-1].Index+1 != l.Index {
				logs = logs[:0]
			}
			logs = append(logs, l)
			return nil
		})
	})
	if err != nil || len(logs) == 0 {
		return err
	}
	// Entries already in the segments: a move interrupted after the copy.
	if last, _ := wal.LastIndex(); last == 0 {
		if err := wal.StoreLogs(logs); err != nil {
			return err
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketLog); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketLog)
		return err
	})
}

// safeBolt opens the file with bbolt, turning its panics (assertions on
// a damaged file) and memory faults in this goroutine (a page beyond the
// file's end) into an error.
func safeBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("opening %s: damaged (%v): %s", path, r, boltDamageHelp)
		}
	}()
	db, err = bolt.Open(path, 0o600, opts)
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("opening %s: held by another process", path)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrChecksum), errors.Is(err, bolt.ErrVersionMismatch):
		return nil, fmt.Errorf("opening %s: damaged (%w): %s", path, err, boltDamageHelp)
	case err != nil:
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// The layout of a bbolt meta page (go.etcd.io/bbolt/internal/common, in
// the machine's byte order, little endian on every platform Legion
// builds for): a 16-byte page header, then magic, version, page size and
// flags (4 bytes each), the root bucket's page and sequence, the free
// list's page, the high-water page id, the transaction id and the
// FNV-64a checksum of everything from magic to the transaction id (8
// bytes each, 56 bytes in all before the checksum).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltMetaAt     = 16
	boltMetaLen    = 56 // magic to the transaction id: what the checksum covers
	boltNoFreelist = ^uint64(0)
)

// boltMeta is what checkBolt needs of a meta page.
type boltMeta struct {
	pageSize                 uint64
	root, freelist, pgid, tx uint64
}

// readBoltMeta decodes the meta page at the start of b, nil when it is not
// a valid one.
func readBoltMeta(b []byte) *boltMeta {
	if len(b) < boltMetaAt+boltMetaLen+8 {
		return nil
	}
	m := b[boltMetaAt:]
	le := binary.LittleEndian
	if le.Uint32(m) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return nil
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaLen])
	if h.Sum64() != le.Uint64(m[boltMetaLen:]) {
		return nil
	}
	return &boltMeta{pageSize: uint64(le.Uint32(m[8:])), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), tx: le.Uint64(m[48:])}
}

// checkBolt refuses a store file bbolt would crash on: bbolt maps the
// file and trusts its meta pages, so a file cut short faults (SIGBUS, a
// fatal error no recover sees) and garbage trips its assertions, some in
// goroutines of its own. The meta page bbolt would use must be whole,
// checksummed and describe a file no longer than this one; then every
// page reachable from it is read here, read-only, where a panic or a
// fault is caught. A missing or empty file is new.
func checkBolt(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("opening %s: damaged (%s): %s", path, fmt.Sprintf(format, args...), boltDamageHelp)
	}
	head := make([]byte, 4096)
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	// The second meta page sits one page in; the first says how long a
	// page is, else try the sizes bbolt may have used.
	metas := []*boltMeta{readBoltMeta(head)}
	sizes := []int64{1024, 2048, 4096, 8192, 16384, 32768, 65536}
	if metas[0] != nil {
		sizes = []int64{int64(metas[0].pageSize)}
	}
	for _, ps := range sizes {
		buf := make([]byte, boltMetaAt+boltMetaLen+8)
		if _, err := f.ReadAt(buf, ps); err != nil {
			continue
		}
		if m := readBoltMeta(buf); m != nil {
			metas = append(metas, m)
			break
		}
	}
	// bbolt uses the valid meta with the higher transaction id.
	var m *boltMeta
	for _, c := range metas {
		if c != nil && (m == nil || c.tx > m.tx) {
			m = c
		}
	}
	switch {
	case m == nil:
		return damaged("no valid meta page in its %d bytes: not a store file, or overwritten", size)
	case m.pageSize < 512 || m.pageSize > 1<<20 || m.pageSize&(m.pageSize-1) != 0:
		return damaged("page size %d", m.pageSize)
	case m.pgid < 3 || m.pgid > uint64(size)/m.pageSize:
		return damaged("%d bytes long, its meta page counts %d pages of %d bytes (%d bytes): cut short",
			size, m.pgid, m.pageSize, m.pgid*m.pageSize)
	case m.root < 2 || m.root >= m.pgid:
		return damaged("root page %d outside pages 2 to %d", m.root, m.pgid-1)
	case m.freelist != boltNoFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return damaged("free list page %d outside pages 2 to %d", m.freelist, m.pgid-1)
	}
	db, err := safeBolt(path, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := readAllPages(db); err != nil {
		return damaged("%v", err)
	}
	return nil
}

// readAllPages reads every key and value of every bucket, so every page
// in use is touched, catching a panic or a fault on the way, and checks
// that the keys come in order.
func readAllPages(db *bolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	var sink byte
	defer runtime.KeepAlive(&sink)
	var walk func(b *bolt.Bucket) error
	walk = func(b *bolt.Bucket) error {
		var prev []byte
		return b.ForEach(func(k, v []byte) error {
			// bbolt's own check, when it opens the file for writing,
			// reports keys out of order by a panic that leaves its
			// checking goroutine stuck: find them here first.
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				return fmt.Errorf("keys out of order: %q after %q", k, prev)
			}
			prev = k
			if v == nil {
				if c := b.Bucket(k); c != nil {
					return walk(c)
				}
			}
			// Values may span overflow pages: touch each page's worth.
			for i := 0; i < len(v); i += 1024 {
				sink += v[i]
			}
			return nil
		})
	}
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) })
	})
}
