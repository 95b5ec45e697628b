package image

import (
	"archive/tar"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// blobGate wraps a registry so that layer blob downloads can be watched:
// how many are in flight at most, and which were ended by their client.
type blobGate struct {
	layers map[string]bool // digests of the layers watched

	mu       sync.Mutex
	inFlight int
	max      int
	more     chan struct{} // closed and replaced whenever inFlight grows
	ended    map[string]bool
}

func newBlobGate(layers ...v1.Layer) *blobGate {
	g := &blobGate{layers: map[string]bool{}, more: make(chan struct{}), ended: map[string]bool{}}
	for _, l := range layers {
		d, _ := l.Digest()
		g.layers[d.String()] = true
	}
	return g
}

// layerOfRequest is the watched layer a request fetches, or "".
func (g *blobGate) layerOfRequest(r *http.Request) string {
	if r.Method != http.MethodGet {
		return ""
	}
	i := strings.LastIndex(r.URL.Path, "/blobs/")
	if i < 0 || !g.layers[r.URL.Path[i+len("/blobs/"):]] {
		return ""
	}
	return r.URL.Path[i+len("/blobs/"):]
}

func (g *blobGate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	close(g.more)
	g.more = make(chan struct{})
}

func (g *blobGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
}

// waitForCompany holds downloads until two have been in flight at once,
// or until the deadline: a pull fetching one layer at a time never gets
// there.
func (g *blobGate) waitForCompany(r *http.Request, deadline <-chan struct{}) {
	for {
		g.mu.Lock()
		n, more := g.max, g.more
		g.mu.Unlock()
		if n >= 2 {
			return
		}
		select {
		case <-more:
		case <-deadline:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (g *blobGate) maxInFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}

func TestPullFetchesLayersConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	var layers []v1.Layer
	for _, n := range []string{"a", "b", "c", "d"} {
		layers = append(layers, layerOf(t, "gzip", ent{name: n, body: strings.Repeat(n, 1<<16)}))
	}
	gate := newBlobGate(layers...)
	deadline := make(chan struct{}) // closed: every waiting download sees it
	timer := time.AfterFunc(10*time.Second, func() { close(deadline) })
	t.Cleanup(func() { timer.Stop() })
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if gate.layerOfRequest(r) != "" {
				gate.enter()
				defer gate.leave()
				gate.waitForCompany(r, deadline)
			}
			h.ServeHTTP(w, r)
		})
	})
	pushImage(t, reg.ref("four:1"), imageOf(t, p, layers...))
	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("four:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if n := gate.maxInFlight(); n < 2 || n > maxFetching {
		t.Fatalf("at most %d layers fetched at once; want 2 to %d", n, maxFetching)
	}
	// Written in order, each onto the one below.
	want := []string{"a", "b", "c", "d"}
	if d := cmp.Diff(want, tree(t, ds.LayerDir(rec.TopChainID()))); d != "" {
		t.Fatalf("top layer (-want +got):\n%s", d)
	}
}

func TestOneLayerFailingStopsTheOthersAndLeavesNothing(t *testing.T) {
	t.Parallel()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	slow := layerOf(t, "gzip", ent{name: "slow", body: strings.Repeat("s", 1<<16)})
	l1 := layerOf(t, "gzip", ent{name: "one", body: strings.Repeat("1", 1<<16)})
	bad := layerOf(t, "gzip", ent{name: "bad", body: strings.Repeat("b", 1<<16)})
	badDigest, _ := bad.Digest()
	slowDigest, _ := slow.Digest()
	// Both watched, so the switch below sees requests for either.
	gate := newBlobGate(slow, bad)
	tamper := tamperBlob(badDigest.String())
	stopped, quit, asked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var askedOnce sync.Once
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		h = tamper(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch gate.layerOfRequest(r) {
			case slowDigest.String():
				// The first layer never comes: only the puller giving up
				// on it ends this request (or the test's end).
				askedOnce.Do(func() { close(asked) })
				select {
				case <-r.Context().Done():
					close(stopped)
				case <-quit:
				}
				return
			case badDigest.String():
				// The bad layer is answered only once the first is on its
				// way, so its failure has a download in flight to stop.
				select {
				case <-asked:
				case <-quit:
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(quit) }) // before the server's Close waits for the request
	pushImage(t, reg.ref("mixed:1"), imageOf(t, p, slow, l1, bad))
	m, ds, _ := newImages(t, freebsdAmd64)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := m.Pull(ctx, reg.ref("mixed:1"), PullOptions{Now: t0})
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "layer 2") {
		t.Fatalf("got %v; want layer 2's digest refused while layer 0 still comes in", err)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the download of layer 0 was never ended")
	}
	if n := len(storedLayers(t, ds)); n != 0 {
		t.Fatalf("%d layers stored; want none", n)
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Fatalf("index holds %d images", len(list))
	}
	ents, _ := os.ReadDir(filepath.Join(m.dir, "tmp"))
	if n := countFiles(ents, ".blob") + countFiles(ents, ".tar"); n != 0 {
		t.Fatalf("%d temporary layer files left", n)
	}
	left, _ := os.ReadDir(filepath.Join(ds.dir, "layers"))
	if len(left) != 0 {
		t.Fatalf("layers directory holds %v", left)
	}
	// Every lock was let go: the same image, served whole, pulls now.
	reg2 := startRegistry(t, nil)
	pushImage(t, reg2.ref("mixed:1"), imageOf(t, p, slow, l1, bad))
	if _, err := m.Pull(ctx, reg2.ref("mixed:1"), PullOptions{Now: t0}); err != nil {
		t.Fatalf("pull after the failed one: %v", err)
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestDirStoreLayersShareUnchangedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	lower := layerOf(t, "gzip",
		ent{name: "bin/", typ: tar.TypeDir},
		ent{name: "bin/su", body: "su", mode: 0o4755},
		ent{name: "etc/", typ: tar.TypeDir},
		ent{name: "etc/passwd", body: "root", mode: 0o644},
		ent{name: "etc/gone", body: "g"},
	)
	upper := layerOf(t, "gzip",
		ent{name: "etc/", typ: tar.TypeDir, mode: 0o750},
		ent{name: "etc/passwd", body: "root\nwww", mode: 0o600},
		ent{name: "etc/.wh.gone"},
	)
	pushImage(t, reg.ref("share:1"), imageOf(t, p, lower, upper))
	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("share:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	lo, up := ds.LayerDir(rec.Layers[0].ChainID), ds.LayerDir(rec.Layers[1].ChainID)
	if inode(t, filepath.Join(lo, "bin/su")) != inode(t, filepath.Join(up, "bin/su")) {
		t.Fatal("a file the upper layer leaves alone was copied, not shared")
	}
	if inode(t, filepath.Join(lo, "etc/passwd")) == inode(t, filepath.Join(up, "etc/passwd")) {
		t.Fatal("a file the upper layer replaces is shared with the lower one")
	}
	// The lower layer is as it came.
	if got := readFile(t, filepath.Join(lo, "etc/passwd")); got != "root" {
		t.Fatalf("lower etc/passwd = %q", got)
	}
	for path, mode := range map[string]os.FileMode{"bin/su": 0o755 | os.ModeSetuid, "etc/passwd": 0o644, "etc": 0o755 | os.ModeDir} {
		fi, err := os.Lstat(filepath.Join(lo, path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Fatalf("lower %s mode %v; want %v", path, fi.Mode(), mode)
		}
	}
	if !exists(filepath.Join(lo, "etc/gone")) || exists(filepath.Join(up, "etc/gone")) {
		t.Fatal("the whiteout was not applied to the upper layer alone")
	}
	fi, _ := os.Lstat(filepath.Join(up, "bin/su"))
	if fi.Mode() != 0o755|os.ModeSetuid {
		t.Fatalf("upper bin/su mode %v", fi.Mode())
	}
	// A container's root is its own: writing into it changes no layer.
	root, err := m.PrepareRoot(ctx, "c1", reg.ref("share:1"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/su"), []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "bin/su")); got != "changed" {
		t.Fatalf("the root's bin/su = %q after the container wrote it", got)
	}
	for _, l := range []string{lo, up} {
		if got := readFile(t, filepath.Join(l, "bin/su")); got != "su" {
			t.Fatalf("layer's bin/su = %q after a container wrote its own", got)
		}
	}
}

// A pull whose context ends while a layer is fetched fails, whatever the
// moment, and records nothing (a pull could once report success, 1 time
// in 2, with the layer missing).
func TestPullCanceledMidLayerRecordsNothing(t *testing.T) {
	t.Parallel()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	l0 := layerOf(t, "gzip", ent{name: "zero", body: strings.Repeat("0", 1<<12)})
	l1 := layerOf(t, "gzip", ent{name: "one", body: strings.Repeat("1", 1<<12)})
	d1, _ := l1.Digest()
	var (
		mu     sync.Mutex
		cancel context.CancelFunc
	)
	quit := make(chan struct{})
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+d1.String()) {
				// The puller gives up while this layer comes in.
				mu.Lock()
				cancel()
				mu.Unlock()
				select {
				case <-r.Context().Done():
				case <-quit:
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(quit) })
	pushImage(t, reg.ref("gone:1"), imageOf(t, p, l0, l1))
	for i := 0; i < 20; i++ {
		m, _, _ := newImages(t, freebsdAmd64)
		ctx, c := context.WithCancel(context.Background())
		mu.Lock()
		cancel = c
		mu.Unlock()
		_, err := m.Pull(ctx, reg.ref("gone:1"), PullOptions{Now: t0})
		c()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("pull %d: got %v; want it canceled", i, err)
		}
		if list, _ := m.List(); len(list) != 0 {
			t.Fatalf("pull %d: index holds %d images after a canceled pull", i, len(list))
		}
	}
}
