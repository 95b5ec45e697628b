package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tarDir packs a directory as tools pack an OCI layout.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		tw.WriteHeader(h)
		if fi.Mode().IsRegular() {
			f, _ := os.Open(p)
			io.Copy(tw, f)
			f.Close()
		}
		return nil
	})
	tw.Close()
	return buf.Bytes()
}

func TestLoadOCIArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	img := imageOf(t, p, layerOf(t, "gzip", ent{name: "etc/motd", body: "loaded"}), layerOf(t, "zstd", ent{name: "app", body: "a"}))
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{annotationRefName: "localhost/mine:1"})); err != nil {
		t.Fatal(err)
	}
	m, ds, _ := newImages(t, freebsdAmd64)
	recs, err := m.Load(ctx, bytes.NewReader(tarDir(t, dir)), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if len(recs) != 1 || recs[0].Reference != "localhost/mine:1" || recs[0].Digest != d.String() || !recs[0].Local || recs[0].Private {
		t.Fatalf("loaded %+v; want localhost/mine:1 at %s, local and public", recs[0], d)
	}
	if got := readFile(t, filepath.Join(ds.LayerDir(recs[0].Layers[0].ChainID), "etc/motd")); got != "loaded" {
		t.Fatalf("etc/motd = %q", got)
	}
	// A localhost name is never asked of a registry; any namespace sees it.
	rec, err := m.Pull(ctx, "localhost/mine:1", PullOptions{Namespace: "shop", Policy: Always, Now: t0})
	if err != nil || rec.Digest != d.String() {
		t.Fatalf("Pull(localhost) = %v, %v", rec, err)
	}
	if _, err := m.Pull(ctx, "localhost/other:1", PullOptions{Now: t0}); !errors.Is(err, ErrNotPresent) {
		t.Fatalf("Pull(missing localhost) = %v; want ErrNotPresent", err)
	}
	list, err := m.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
	if _, err := m.Remove(ctx, "localhost/mine:1"); err != nil {
		t.Fatal(err)
	}
	if n := len(storedLayers(t, ds)); n != 0 {
		t.Fatalf("%d layers left after removing the only image", n)
	}
}

func TestLoadDockerSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	img := imageOf(t, p, layerOf(t, "gzip", ent{name: "hello", body: "docker"}))
	tag, _ := name.NewTag("localhost/dock:2")
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		t.Fatal(err)
	}
	m, ds, _ := newImages(t, freebsdAmd64)
	recs, err := m.Load(ctx, &buf, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Reference != "localhost/dock:2" {
		t.Fatalf("loaded %+v", recs)
	}
	if got := readFile(t, filepath.Join(ds.LayerDir(recs[0].TopChainID()), "hello")); got != "docker" {
		t.Fatalf("hello = %q", got)
	}
	if _, err := m.Load(ctx, bytes.NewReader(tarBytes(t, []ent{{name: "x", body: "y"}})), "", t0); err == nil {
		t.Fatal("an archive of neither kind loaded")
	}
}

func TestPullPolicyNeverAsksNoRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("n:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "n", body: "n"})))
	m, _, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, reg.ref("n:1"), PullOptions{Policy: Never, Now: t0}); !errors.Is(err, ErrNotPresent) {
		t.Fatalf("Never on an empty store = %v; want ErrNotPresent", err)
	}
	if n := reg.count("GET /v2/n/manifests/1"); n != 0 {
		t.Fatalf("pullPolicy Never fetched the manifest %d times", n)
	}
	if _, err := m.Pull(ctx, reg.ref("n:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	before := reg.count("GET /v2/n/manifests/1") + reg.count("HEAD /v2/n/manifests/1")
	if _, err := m.Pull(ctx, reg.ref("n:1"), PullOptions{Policy: Never, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if after := reg.count("GET /v2/n/manifests/1") + reg.count("HEAD /v2/n/manifests/1"); after != before {
		t.Fatal("pullPolicy Never asked the registry")
	}
	// Nor does a reference by digest of a stored image, even with Always.
	rec, err := m.Get(reg.ref("n:1"))
	if err != nil {
		t.Fatal(err)
	}
	total := reg.total()
	if _, err := m.Pull(ctx, reg.ref("n@"+rec.Digest), PullOptions{Policy: Always, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if reg.total() != total {
		t.Fatal("a stored image by digest asked the registry")
	}
	// Always by tag does ask.
	if _, err := m.Pull(ctx, reg.ref("n:1"), PullOptions{Policy: Always, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if reg.count("GET /v2/n/manifests/1") == 0 {
		t.Fatal("Always by tag asked nothing")
	}
}

func TestLoadRefusesAlteredBlobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	for _, what := range []string{"config", "layer"} {
		t.Run(what, func(t *testing.T) {
			img := imageOf(t, p, layerOf(t, "gzip", ent{name: "f", body: "original"}))
			dir := t.TempDir()
			lp, _ := layout.Write(dir, empty.Index)
			if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{annotationRefName: "localhost/x:1"})); err != nil {
				t.Fatal(err)
			}
			var d string
			if what == "config" {
				h, _ := img.ConfigName()
				d = h.Hex
			} else {
				ls, _ := img.Layers()
				h, _ := ls[0].Digest()
				d = h.Hex
			}
			blob := filepath.Join(dir, "blobs", "sha256", d)
			b, _ := os.ReadFile(blob)
			b[len(b)/2] ^= 0x01
			os.WriteFile(blob, b, 0o644)
			m, ds, _ := newImages(t, freebsdAmd64)
			if _, err := m.Load(ctx, bytes.NewReader(tarDir(t, dir)), "", t0); !errors.Is(err, ErrDigest) {
				t.Fatalf("got %v; want ErrDigest", err)
			}
			if n := len(storedLayers(t, ds)); n != 0 {
				t.Fatalf("%d layers stored", n)
			}
		})
	}
}
