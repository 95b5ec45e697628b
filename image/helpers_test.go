package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var freebsdAmd64 = PlatformRule{Arch: "amd64"}

// ent is one tar entry of a hand-made layer.
type ent struct {
	name string
	typ  byte // tar.TypeReg when zero
	body string
	link string
	mode int64
	uid  int
	gid  int
	pax  map[string]string
}

func tarBytes(t testing.TB, ents []ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: t0, PAXRecords: e.pax}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if len(e.pax) > 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf makes a layer compressed with comp ("gzip", "zstd" or "none").
func layerOf(t testing.TB, comp string, ents ...ent) v1.Layer {
	t.Helper()
	b := tarBytes(t, ents)
	if comp == "none" {
		return static.NewLayer(b, types.OCIUncompressedLayer)
	}
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	opts := []tarball.LayerOption{}
	if comp == "zstd" {
		opts = append(opts, tarball.WithCompression(compression.ZStd))
	}
	l, err := tarball.LayerFromOpener(opener, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf builds an image of platform p from layers.
func imageOf(t testing.TB, p Platform, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Config.Cmd = []string{"/bin/sh"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// indexOf builds an index with one image per platform.
func indexOf(t testing.TB, imgs map[Platform]v1.Image) v1.ImageIndex {
	t.Helper()
	var idx v1.ImageIndex = empty.Index
	for p, img := range imgs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return idx
}

// testRegistry is go-containerregistry's registry on loopback, with a
// count of requests by path and an optional wrapper.
type testRegistry struct {
	host string
	mu   sync.Mutex
	hits map[string]int
}

func (r *testRegistry) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

func (r *testRegistry) blobGets(d v1.Hash) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, v := range r.hits {
		if strings.HasPrefix(k, "GET ") && strings.HasSuffix(k, "/blobs/"+d.String()) {
			n += v
		}
	}
	return n
}

func startRegistry(t testing.TB, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	tr := &testRegistry{hits: map[string]int{}}
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tr.mu.Lock()
		tr.hits[req.Method+" "+req.URL.Path]++
		tr.mu.Unlock()
		inner.ServeHTTP(w, req)
	})
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	tr.host = strings.TrimPrefix(s.URL, "http://")
	return tr
}

func (r *testRegistry) ref(repo string) string { return r.host + "/" + repo }

func pushImage(t testing.TB, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
}

func pushIndex(t testing.TB, ref string, idx v1.ImageIndex, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		t.Fatal(err)
	}
}

// countingStore records BeginLayer calls of the store it wraps.
type countingStore struct {
	Store
	mu    sync.Mutex
	begun []string
}

func (c *countingStore) BeginLayer(ctx context.Context, chainID, parent string) (PendingLayer, error) {
	c.mu.Lock()
	c.begun = append(c.begun, chainID)
	c.mu.Unlock()
	return c.Store.BeginLayer(ctx, chainID, parent)
}

// newDirStore makes a store under dir whose roots (overlay mounts, on
// Linux as root) are removed when the test ends, before its TempDir.
func newDirStore(t testing.TB, dir string) *DirStore {
	t.Helper()
	ds, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		roots, err := ds.Roots(context.Background())
		if err != nil && !errors.Is(err, os.ErrNotExist) { // a store removed has none
			t.Errorf("roots left: %v", err)
		}
		for _, r := range roots {
			if err := ds.RemoveRoot(context.Background(), r.ID); err != nil {
				t.Errorf("root %s left: %v", r.ID, err)
			}
		}
	})
	return ds
}

func newImages(t testing.TB, rule PlatformRule) (*Images, *DirStore, string) {
	t.Helper()
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "store"))
	m, err := Open(Options{DataDir: filepath.Join(dir, "data"), Store: ds, Platform: rule})
	if err != nil {
		t.Fatal(err)
	}
	return m, ds, dir
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func storedLayers(t testing.TB, s Store) []string {
	t.Helper()
	ls, err := s.Layers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.ChainID)
	}
	return out
}

func statOwner(t testing.TB, p string) [2]int {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]int{int(st.Uid), int(st.Gid)}
}

// total is the number of requests served.
func (r *testRegistry) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.hits {
		n += v
	}
	return n
}

// tamperBlob serves one blob with a byte changed, same length.
func tamperBlob(digest string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if len(b) > 20 {
				b[len(b)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(b)
		})
	}
}
