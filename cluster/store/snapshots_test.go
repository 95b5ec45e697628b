package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// snapshotStoreIn is a snapshot store over a new file, sealed.
func snapshotStoreIn(t testing.TB) *snapshotStore {
	t.Helper()
	db, err := openBolt(filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	seal, err := newSealer(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return &snapshotStore{db: db, seal: seal}
}

// takeSnapshot stores data as a snapshot at index and returns its id.
func takeSnapshot(t testing.TB, s *snapshotStore, index uint64, data []byte) string {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readSnapshot(t *testing.T, s *snapshotStore, id string) []byte {
	t.Helper()
	meta, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ID != id || meta.Size != int64(len(data)) {
		t.Fatalf("snapshot meta %s of %d bytes, read %s of %d", meta.ID, meta.Size, id, len(data))
	}
	return data
}

// partKeys are the keys of the parts a snapshot is held in.
func partKeys(t *testing.T, s *snapshotStore) []string {
	t.Helper()
	var keys []string
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSnapshots).Cursor()
		for k, _ := c.Seek(snapPartPrefix); k != nil && bytes.HasPrefix(k, snapPartPrefix); k, _ = c.Next() {
			keys = append(keys, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A snapshot is held in parts of snapPart bytes and read back whole; the
// next one, smaller, leaves none of the first one's parts behind.
func TestSnapshotIsHeldInParts(t *testing.T) {
	t.Parallel()
	s := snapshotStoreIn(t)
	big := bytes.Repeat([]byte("0123456789"), 3*snapPart/10+7)
	id := takeSnapshot(t, s, 10, big)
	if keys := partKeys(t, s); len(keys) != 4 {
		t.Fatalf("a snapshot of %d bytes is held in %d parts (%v), want 4 of at most %d", len(big), len(keys), keys, snapPart)
	}
	if got := readSnapshot(t, s, id); !bytes.Equal(got, big) {
		t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(big))
	}
	small := []byte(`{"index":20,"objects":[]}`)
	id = takeSnapshot(t, s, 20, small)
	if keys := partKeys(t, s); len(keys) != 1 {
		t.Fatalf("after a one-part snapshot, parts %v remain", keys)
	}
	if got := readSnapshot(t, s, id); !bytes.Equal(got, small) {
		t.Fatalf("read back %q, want %q", got, small)
	}
}

// A file whose snapshot is one value, as managers wrote before parts, is
// read, and the next snapshot replaces it.
func TestSnapshotHeldWholeIsRead(t *testing.T) {
	t.Parallel()
	s := snapshotStoreIn(t)
	data := []byte(`{"index":5,"objects":[]}`)
	meta, err := json.Marshal(raft.SnapshotMeta{ID: "1-5-1", Index: 5, Term: 1, Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		if err := b.Put(keySnapMeta, s.seal.seal(tableSnapshots, keySnapMeta, meta)); err != nil {
			return err
		}
		return b.Put(keySnapData, s.seal.seal(tableSnapshots, keySnapData, data))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readSnapshot(t, s, "1-5-1"); !bytes.Equal(got, data) {
		t.Fatalf("the whole snapshot read back as %q, want %q", got, data)
	}
	next := []byte(`{"index":9,"objects":[]}`)
	id := takeSnapshot(t, s, 9, next)
	err = s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSnapshots).Get(keySnapData) != nil {
			t.Error("the whole snapshot stayed beside the new one's parts")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readSnapshot(t, s, id); !bytes.Equal(got, next) {
		t.Fatalf("the next snapshot read back as %q, want %q", got, next)
	}
}

// Opening a snapshot reads none of its data: raft opens the snapshot it
// sends before it reaches the follower, which may be down. The data is
// read at the first Read, and a snapshot replaced in between is refused
// then, not read as another's.
func TestSnapshotDataIsReadAtFirstRead(t *testing.T) {
	t.Parallel()
	s := snapshotStoreIn(t)
	first := bytes.Repeat([]byte("a"), 2*snapPart+3)
	id := takeSnapshot(t, s, 10, first)
	if _, _, err := s.Open("1-9-1"); err == nil || !strings.Contains(err.Error(), "not held") {
		t.Fatalf("opening a snapshot not held: %v, want it refused", err)
	}
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	next := takeSnapshot(t, s, 20, []byte(`{"index":20,"objects":[]}`))
	if _, err := io.ReadAll(rc); err == nil || !strings.Contains(err.Error(), "replaced by "+next) {
		t.Fatalf("reading snapshot %s after %s replaced it: %v, want it refused", id, next, err)
	}
	rc.Close()
	if got := readSnapshot(t, s, next); string(got) != `{"index":20,"objects":[]}` {
		t.Fatalf("read back %q", got)
	}
}

// BenchmarkSnapshotOpen is what raft pays at each try to send a 32 MiB
// snapshot: opening it, and opening and reading it (what Open cost
// before it left the data to the first Read).
func BenchmarkSnapshotOpen(b *testing.B) {
	s := snapshotStoreIn(b)
	id := takeSnapshot(b, s, 10, bytes.Repeat([]byte("0123456789abcdef"), 2<<20))
	for _, read := range []bool{false, true} {
		b.Run(fmt.Sprintf("read=%v", read), func(b *testing.B) {
			for range b.N {
				_, rc, err := s.Open(id)
				if err != nil {
					b.Fatal(err)
				}
				if read {
					if _, err := io.Copy(io.Discard, rc); err != nil {
						b.Fatal(err)
					}
				}
				rc.Close()
			}
		})
	}
}
