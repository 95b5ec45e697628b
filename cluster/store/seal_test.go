package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	bolt "go.etcd.io/bbolt"
)

func newKey(t testing.TB) []byte {
	t.Helper()
	key, err := LoadKey(filepath.Join(t.TempDir(), "pki", "store.key"))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// secretValue is a value no file should hold in the clear.
func secretValue(t *testing.T) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "s3cret-" + hex.EncodeToString(b)
}

// findInFiles lists the files under dir that hold any of needles.
func findInFiles(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(data, []byte(n)) {
				hits = append(hits, p+" holds "+n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// Three managers with their own keys: after a write, a snapshot and a
// restart, no file of any of them holds the value or its base64 (the
// JSON form of a Config's data), and each reads it back.
func TestSealedStoresHoldNoValueInTheClear(t *testing.T) {
	t.Parallel()
	keys := [][]byte{newKey(t), newKey(t), newKey(t)}
	ns := threeNodesKeys(t, FastTiming(), keys)
	val := secretValue(t)
	ctx := context.Background()
	if _, _, err := ns[0].s.Put(ctx, config("default", "db-password", val), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	putConfigs(t, ns[0], 3)
	if err := ns[0].s.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for _, n := range ns {
		waitFor(t, n.id+" to apply", 10*time.Second, func() bool {
			_, _, err := n.s.Get(legion.KindConfig, "default", "c2")
			return err == nil
		})
	}
	for _, n := range ns {
		n.s.Close()
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(val))
	for _, n := range ns {
		if hits := findInFiles(t, n.dir, val, b64); len(hits) > 0 {
			t.Errorf("%s: %v", n.id, hits)
		}
	}
	for i, n := range ns {
		again := openNodeKey(t, n.id, n.dir, FastTiming(), keys[i])
		o, _, err := again.s.Get(legion.KindConfig, "default", "db-password")
		if err != nil || string(o.(*legion.Config).Spec.Data) != val {
			t.Errorf("%s reopened: %v %+v", n.id, err, o)
		}
		again.s.Close()
	}
	// Another manager's key opens nothing.
	if wrong, err := Open(Config{Dir: ns[1].dir, ID: "m2", Transport: ns[1].tr, Key: keys[0]}); err == nil {
		_, _, gerr := wrong.Get(legion.KindConfig, "default", "db-password")
		wrong.Close()
		if !errors.Is(gerr, ErrSealed) {
			t.Fatalf("m2's store read with m1's key: %v, want ErrSealed", gerr)
		}
	} else if !errors.Is(err, ErrSealed) {
		t.Fatalf("m2's store opened with m1's key: %v, want ErrSealed", err)
	}
}

// A store written in the clear is read as it is once it has a key, and
// what is written from then on is sealed.
func TestClearStoreIsSealedAsItIsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := leaderIn(t, dir)
	old := secretValue(t)
	ctx := context.Background()
	if _, _, err := n.s.Put(ctx, config("default", "old", old), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.s.Close()
	if len(findInFiles(t, dir, base64.StdEncoding.EncodeToString([]byte(old)))) == 0 {
		t.Fatal("a store without a key holds nothing in the clear: the test cannot tell sealing from not")
	}
	key := newKey(t)
	n = openNodeKey(t, "m1", dir, FastTiming(), key)
	defer n.s.Close()
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	o, _, err := n.s.Get(legion.KindConfig, "default", "old")
	if err != nil || string(o.(*legion.Config).Spec.Data) != old {
		t.Fatalf("the value written in the clear: %v %+v", err, o)
	}
	fresh := secretValue(t)
	if _, _, err := n.s.Put(ctx, config("default", "new", fresh), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.s.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	n.s.Close()
	if hits := findInFiles(t, dir, fresh, base64.StdEncoding.EncodeToString([]byte(fresh))); len(hits) > 0 {
		t.Fatalf("a value written with a key is in the clear: %v", hits)
	}
}

// A sealed value copied under another key does not open: the key it was
// sealed for is part of the seal.
func TestSealedValueMovedToAnotherKeyFailsToOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := newKey(t)
	n := openNodeKey(t, "m1", dir, FastTiming(), key)
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, _, err := n.s.Put(ctx, config("default", name, secretValue(t)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n.s.Close()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		a := bytes.Clone(b.Get([]byte(legion.Key(legion.KindConfig, "default", "a"))))
		if !sealed(a) {
			t.Errorf("Config a is stored in the clear: %.40q", a)
		}
		return b.Put([]byte(legion.Key(legion.KindConfig, "default", "b")), a)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	n = openNodeKey(t, "m1", dir, FastTiming(), key)
	defer n.s.Close()
	if _, _, err := n.s.Get(legion.KindConfig, "default", "b"); !errors.Is(err, ErrSealed) {
		t.Fatalf("reading a value moved from another key: %v, want ErrSealed", err)
	}
	if _, _, err := n.s.Get(legion.KindConfig, "default", "a"); err != nil {
		t.Fatalf("the value in its own place: %v", err)
	}
}

func TestLoadKeyMakesOneKeyAndKeepsIt(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "pki", "store.key")
	a, err := LoadKey(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 || len(a) != KeySize {
		t.Fatalf("key file %v %v, %d bytes", fi.Mode(), err, len(a))
	}
	b, err := LoadKey(p)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("second load: %v, same %v", err, bytes.Equal(a, b))
	}
	os.WriteFile(p, []byte("short"), 0o600)
	if _, err := LoadKey(p); err == nil {
		t.Fatal("a 5-byte key was taken")
	}
}
