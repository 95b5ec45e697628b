package store

import (
	"encoding/binary"
	"errors"
	"fmt"
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
)

var keyApplied = []byte("applied")

// initialMmapSize is address space only (the file grows as it needs).
const initialMmapSize = 256 << 20

// FileName is the store's file inside a manager's data directory.
const FileName = "store.db"

// LogDir is the directory of the Raft log's segments inside a manager's
// data directory.
const LogDir = "raft-log"

func openBolt(path string) (*bolt.DB, error) {
	// A short lock timeout: a second daemon on the same directory gets a
	// clear error instead of waiting forever. The free list is not written
	// at each commit (bbolt rebuilds it when it opens the file, as etcd
	// does): that halves what a commit writes and nearly doubles fsynced
	// writes per second. The map is made large at once: growing it makes
	// a commit wait for every open read, and new reads wait for it.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType,
		NoFreelistSync: true, InitialMmapSize: initialMmapSize})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("opening %s: held by another process", path)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
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
