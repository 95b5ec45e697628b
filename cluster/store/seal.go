package store

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/chacha20poly1305"
)

// Encryption at rest: every value the store writes (objects, the applied
// index, Raft log entries, the term and vote, snapshots) is sealed with
// ChaCha20-Poly1305 under the manager's own data key, with a random nonce
// and the table and key it is kept under as associated data, so a sealed
// value moved to another place fails to open. Keys stay readable (kinds,
// namespaces, names, log indexes): the layout of the files is not a
// secret, their contents are.
//
// A store written before values were sealed is read as it is; each value
// is sealed when it is next written.

// KeySize is the length of a store's data key.
const KeySize = chacha20poly1305.KeySize

// sealMagic starts every sealed value. Nothing the store wrote in the
// clear starts with it: objects and snapshots are JSON, the applied index
// and terms are 8-byte numbers far below 0x004c5301 << 32, and log
// entries carry their own flag (logSealed).
var sealMagic = []byte{0x00, 'L', 'S', 0x01}

// ErrSealed is returned for a sealed value the store cannot open: another
// manager's file, a wrong or missing key, or a value tampered with.
var ErrSealed = errors.New("sealed value cannot be opened with this manager's data key")

// sealer seals and opens values; a nil sealer writes in the clear.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		return nil, nil
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("store data key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// additional is the associated data binding a value to its place.
func additional(table string, key []byte) []byte {
	ad := make([]byte, 0, len(table)+1+len(key))
	ad = append(ad, table...)
	ad = append(ad, 0)
	return append(ad, key...)
}

// seal returns plain sealed for table and key (plain itself without a
// key).
func (s *sealer) seal(table string, key, plain []byte) []byte {
	if s == nil {
		return plain
	}
	ns := s.aead.NonceSize()
	out := make([]byte, len(sealMagic)+ns, len(sealMagic)+ns+len(plain)+s.aead.Overhead())
	copy(out, sealMagic)
	if _, err := rand.Read(out[len(sealMagic):]); err != nil {
		panic("store: no randomness for a nonce: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return s.aead.Seal(out, out[len(sealMagic):], plain, additional(table, key))
}

// sealed reports whether val is a sealed value.
func sealed(val []byte) bool {
	return len(val) >= len(sealMagic)+chacha20poly1305.NonceSize+chacha20poly1305.Overhead && bytes.HasPrefix(val, sealMagic)
}

// open returns the plain value of val, which was sealed for table and key
// or written in the clear.
func (s *sealer) open(table string, key, val []byte) ([]byte, error) {
	if !sealed(val) {
		return val, nil
	}
	if s == nil {
		return nil, fmt.Errorf("%s %q: %w (the store was opened without one)", table, key, ErrSealed)
	}
	ns := s.aead.NonceSize()
	nonce := val[len(sealMagic) : len(sealMagic)+ns]
	plain, err := s.aead.Open(nil, nonce, val[len(sealMagic)+ns:], additional(table, key))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", table, key, ErrSealed)
	}
	return plain, nil
}

// LoadKey reads the data key at path, making it (mode 0600, in a
// directory of mode 0700) if there is none yet.
func LoadKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(key) != KeySize {
			return nil, fmt.Errorf("store data key %s: %d bytes, want %d", path, len(key), KeySize)
		}
		return key, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("store data key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store data key: %w", err)
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Written aside and renamed, so a crash leaves no short key behind.
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store data key: %w", err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store data key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store data key: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("store data key: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("store data key: %w", err)
	}
	return key, nil
}
