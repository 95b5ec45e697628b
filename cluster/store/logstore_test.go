package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func TestLogStoreKeepsEntriesAndRanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := openBolt(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wal, err := openWAL(filepath.Join(dir, LogDir), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	vote, _, err := openVoteFile(filepath.Join(dir, LogDir), db)
	if err != nil {
		t.Fatal(err)
	}
	defer vote.close()
	s := &logStore{wal: wal, vote: vote}
	if i, _ := s.FirstIndex(); i != 0 {
		t.Fatalf("empty first index %d", i)
	}
	at := time.Unix(100, 5)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}, AppendedAt: at})
	}
	logs[3].Extensions = []byte("ext")
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := s.GetLog(4, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*logs[3], got); diff != "" {
		t.Fatalf("entry 4 (-stored +read):\n%s", diff)
	}
	if err := s.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 4 || last != 10 {
		t.Fatalf("range %d..%d, want 4..10", first, last)
	}
	if err := s.GetLog(2, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v", err)
	}
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing stable key: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("stable key: %d %v", v, err)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(&raft.Log{Term: 1, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte("e")}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, 1, &l); err != nil {
			return
		}
		var again raft.Log
		if err := decodeLog(encodeLog(&l), 1, &again); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}

func TestDefaultTimingIsTheSpecs(t *testing.T) {
	t.Parallel()
	d := DefaultTiming()
	// Elections after 5 to 10 s of silence (raft waits between the
	// timeout and twice it); heartbeats every tenth of it.
	if d.HeartbeatTimeout != 5*time.Second || d.ElectionTimeout != 5*time.Second || DefaultWriteTimeout != 30*time.Second {
		t.Fatalf("default timing %+v, write timeout %s", d, DefaultWriteTimeout)
	}
}

// Writes that arrive while a transaction runs share the next one; a
// failing one fails alone.
func TestCommitterGroupsAndIsolatesFailures(t *testing.T) {
	t.Parallel()
	db, err := openBolt(filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := &committer{db: db}
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			errs <- c.update(func(tx *bolt.Tx) error {
				if i == 7 {
					return errors.New("refused")
				}
				return tx.Bucket(bucketMeta).Put(u64(uint64(i)), []byte("x"))
			})
		}()
	}
	failed := 0
	for range 20 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d writes failed, want the one that refused", failed)
	}
	n := 0
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, _ []byte) error {
			if len(k) == 8 {
				n++
			}
			return nil
		})
	})
	if n != 19 {
		t.Fatalf("%d writes stored, want 19", n)
	}
}
