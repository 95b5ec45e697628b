package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Record is one image in the index, by canonical reference.
type Record struct {
	Reference string `json:"reference"`
	// Digest is what the reference resolved to: the index's digest for an
	// image of several platforms, as pins and signatures name it.
	Digest string `json:"digest"`
	// Manifest is the digest of the platform's image manifest.
	Manifest     string          `json:"manifest"`
	Platform     Platform        `json:"platform"`
	ConfigDigest string          `json:"configDigest"`
	Config       json.RawMessage `json:"config"`
	Layers       []LayerRecord   `json:"layers"`
	// Private images were pulled with a login and are visible only to the
	// namespaces listed; the others are anyone's.
	Private    bool      `json:"private,omitempty"`
	Namespaces []string  `json:"namespaces,omitempty"`
	Local      bool      `json:"local,omitempty"` // loaded, not pulled
	Pulled     time.Time `json:"pulled"`
	LastUsed   time.Time `json:"lastUsed"`
}

// LayerRecord is one layer of an image.
type LayerRecord struct {
	Digest    string `json:"digest"`
	DiffID    string `json:"diffID"`
	ChainID   string `json:"chainID"`
	MediaType string `json:"mediaType,omitempty"`
	Size      int64  `json:"size"`
}

// clone is a copy of the record sharing nothing with it: what Get and
// List hand out, the index kept by snapshot staying as read.
func (r *Record) clone() *Record {
	c := *r
	c.Config = slices.Clone(r.Config)
	c.Layers = slices.Clone(r.Layers)
	c.Namespaces = slices.Clone(r.Namespaces)
	return &c
}

// TopChainID is the chain id a container root is made from.
func (r *Record) TopChainID() string {
	if len(r.Layers) == 0 {
		return ""
	}
	return r.Layers[len(r.Layers)-1].ChainID
}

// ParsedConfig reads the record's config.
func (r *Record) ParsedConfig() (*Config, error) { return ParseConfig(r.Config) }

// VisibleTo reports whether a namespace may use the image without asking
// the registry.
func (r *Record) VisibleTo(namespace string) bool {
	return !r.Private || slices.Contains(r.Namespaces, namespace)
}

// indexFile is the on-disk form of <data-dir>/images/index.json.
type indexFile struct {
	Images map[string]*Record `json:"images"`
}

// indexStore is the image index file with its lock.
type indexStore struct {
	dir string // <data-dir>/images

	// The index as last read, with that file kept open: the file is only
	// ever replaced (write renames a new one over it), never changed, and
	// an inode held open is not reused, so while the path names the same
	// inode the index is unchanged.
	mu      sync.Mutex
	held    *os.File
	heldDev uint64
	heldIno uint64
	last    *indexFile
}

func (x *indexStore) path() string { return filepath.Join(x.dir, "index.json") }

// lock takes the store's file lock (flock on <dir>/lock), so a CLI load
// and a pulling daemon change the store one at a time.
func (x *indexStore) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(x.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func (x *indexStore) read() (*indexFile, error) {
	b, err := os.ReadFile(x.path())
	if errors.Is(err, os.ErrNotExist) {
		return &indexFile{Images: map[string]*Record{}}, nil
	}
	if err != nil {
		return nil, err
	}
	return x.decode(b)
}

func (x *indexStore) decode(b []byte) (*indexFile, error) {
	var f indexFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", x.path(), err)
	}
	if f.Images == nil {
		f.Images = map[string]*Record{}
	}
	return &f, nil
}

// write replaces the file atomically: a temporary file, synced, renamed.
func (x *indexStore) write(f *indexFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(x.dir, ".index-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), x.path())
}

// update runs fn on the index under the lock and writes it back when fn
// returns nil.
func (x *indexStore) update(fn func(*indexFile) error) error {
	unlock, err := x.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := x.read()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	return x.write(f)
}

// snapshot is the index as it is now, read without the lock (the file
// is replaced whole, so the one opened is complete). The same value goes
// to every caller until the file changes: callers must not change it.
// Reading it each time, under the lock, queued a hundred pods starting at
// once for most of a second.
func (x *indexStore) snapshot() (*indexFile, error) {
	var st syscall.Stat_t
	err := syscall.Stat(x.path(), &st)
	if errors.Is(err, os.ErrNotExist) {
		return &indexFile{Images: map[string]*Record{}}, nil
	}
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.last != nil && uint64(st.Dev) == x.heldDev && uint64(st.Ino) == x.heldIno {
		return x.last, nil
	}
	fh, err := os.Open(x.path())
	if errors.Is(err, os.ErrNotExist) {
		return &indexFile{Images: map[string]*Record{}}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Fstat(int(fh.Fd()), &st); err != nil {
		fh.Close()
		return nil, err
	}
	b, err := io.ReadAll(fh)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := x.decode(b)
	if err != nil {
		fh.Close()
		return nil, err
	}
	x.forget()
	x.held, x.heldDev, x.heldIno, x.last = fh, uint64(st.Dev), uint64(st.Ino), f
	return f, nil
}

// forget drops the index kept by snapshot; x.mu is held.
func (x *indexStore) forget() {
	if x.held != nil {
		x.held.Close()
	}
	x.held, x.last = nil, nil
}

// close lets the kept index's file go.
func (x *indexStore) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forget()
}

func sortedRecords(m map[string]*Record) []*Record {
	out := make([]*Record, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reference < out[j].Reference })
	return out
}
