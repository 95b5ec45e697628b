package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestExportLoadRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	img := imageOf(t, p,
		layerOf(t, "gzip",
			ent{name: "bin/", typ: tar.TypeDir},
			ent{name: "bin/su", body: "su", mode: 0o4555, uid: 0, gid: 0},
			ent{name: "etc/old", body: "old"},
			ent{name: "home/u/", typ: tar.TypeDir, uid: 1001, gid: 1001},
			ent{name: "home/u/f", body: "f", uid: 1001, gid: 1001},
			ent{name: "lib/a", body: "same inode"},
			ent{name: "lib/b", typ: tar.TypeLink, link: "lib/a"},
		),
		layerOf(t, "zstd", ent{name: "etc/.wh.old"}, ent{name: "etc/new", body: "new"}, ent{name: "ln", typ: tar.TypeSymlink, link: "/etc/new"}),
	)
	pushImage(t, reg.ref("app:1"), img)
	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("app:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := m.Export(ctx, reg.ref("app:1"), &archive); err != nil {
		t.Fatal(err)
	}

	m2, ds2, _ := newImages(t, freebsdAmd64)
	recs, err := m2.Load(ctx, bytes.NewReader(archive.Bytes()), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Reference != rec.Reference || len(recs[0].Layers) != 1 {
		t.Fatalf("loaded %+v; want %s as one layer", recs, rec.Reference)
	}
	a, b := ds.LayerDir(rec.TopChainID()), ds2.LayerDir(recs[0].TopChainID())
	if d := cmp.Diff(tree(t, a), tree(t, b)); d != "" {
		t.Fatalf("files differ after export and load (-pulled +loaded):\n%s", d)
	}
	if fi, _ := os.Stat(filepath.Join(b, "bin/su")); fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("setuid lost: %v", fi.Mode())
	}
	if os.Geteuid() == 0 {
		if got := statOwner(t, filepath.Join(b, "home/u/f")); got != [2]int{1001, 1001} {
			t.Fatalf("owner %v", got)
		}
	}
	la, _ := os.Stat(filepath.Join(b, "lib/a"))
	lb, _ := os.Stat(filepath.Join(b, "lib/b"))
	if !os.SameFile(la, lb) {
		t.Fatal("hard link lost")
	}
	// The config keeps its keys; rootfs names the one new layer.
	var before, after map[string]json.RawMessage
	json.Unmarshal(rec.Config, &before)
	json.Unmarshal(recs[0].Config, &after)
	if string(before["config"]) != string(after["config"]) || string(before["os"]) != string(after["os"]) {
		t.Fatalf("config changed:\n%s\n%s", before["config"], after["config"])
	}
	cfg, _ := recs[0].ParsedConfig()
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != recs[0].Layers[0].DiffID {
		t.Fatalf("rootfs %v", cfg.RootFS)
	}

	// Docker's manifest.json beside the layout reads with another tool.
	f := filepath.Join(t.TempDir(), "a.tar")
	os.WriteFile(f, archive.Bytes(), 0o600)
	tag, _ := name.NewTag(rec.Reference)
	dimg, err := tarball.ImageFromPath(f, &tag)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := dimg.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("docker view: %d layers, %v", len(ls), err)
	}
	if d, _ := ls[0].DiffID(); d.String() != recs[0].Layers[0].DiffID {
		t.Fatalf("docker view diff_id %s; want %s", d, recs[0].Layers[0].DiffID)
	}
}

func TestPushPackedImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("src:1"), imageOf(t, p,
		layerOf(t, "gzip", ent{name: "a", body: "a"}, ent{name: "gone", body: "g"}),
		layerOf(t, "gzip", ent{name: ".wh.gone"}, ent{name: "b", body: "b"})))
	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("src:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := m.Push(ctx, reg.ref("src:1"), reg.ref("built/out:2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, ds2, _ := newImages(t, freebsdAmd64)
	got, err := m2.Pull(ctx, reg.ref("built/out:2"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest || len(got.Layers) != 1 {
		t.Fatalf("pulled %s with %d layers; want %s with one", got.Digest, len(got.Layers), digest)
	}
	if d := cmp.Diff(tree(t, ds.LayerDir(rec.TopChainID())), tree(t, ds2.LayerDir(got.TopChainID()))); d != "" {
		t.Fatalf("(-source +pushed):\n%s", d)
	}
	if _, err := m.Push(ctx, reg.ref("src:1"), "localhost/x:1", nil); err == nil {
		t.Fatal("pushed to localhost")
	}
}

func TestPushIndexOfPlatforms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	fbsd, lin := Platform{OS: "freebsd", Arch: "amd64"}, Platform{OS: "linux", Arch: "amd64"}
	pushImage(t, reg.ref("src:freebsd"), imageOf(t, fbsd, layerOf(t, "gzip", ent{name: "os", body: "freebsd"})))
	pushImage(t, reg.ref("src:linux"), imageOf(t, lin, layerOf(t, "gzip", ent{name: "os", body: "linux"})))
	m, _, _ := newImages(t, PlatformRule{Arch: "amd64", AllowLinux: true})
	digests := map[Platform]string{}
	for p, tag := range map[Platform]string{fbsd: "freebsd", lin: "linux"} {
		if _, err := m.Pull(ctx, reg.ref("src:"+tag), PullOptions{Now: t0}); err != nil {
			t.Fatal(err)
		}
		d, err := m.Push(ctx, reg.ref("src:"+tag), reg.ref("out:"+tag), nil)
		if err != nil {
			t.Fatal(err)
		}
		digests[p] = d
	}
	idxDigest, err := m.PushIndex(ctx, reg.ref("out:1"), digests, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Resolve(ctx, reg.ref("out:1"), nil); err != nil || got != idxDigest {
		t.Fatalf("Resolve = %s, %v; want the index %s", got, err, idxDigest)
	}
	for _, c := range []struct {
		rule PlatformRule
		want string
	}{{PlatformRule{Arch: "amd64"}, "freebsd"}, {PlatformRule{Arch: "amd64", AllowLinux: true}, "freebsd"}} {
		m2, ds2, _ := newImages(t, c.rule)
		rec, err := m2.Pull(ctx, reg.ref("out:1"), PullOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(ds2.LayerDir(rec.TopChainID()), "os")); got != c.want || rec.Digest != idxDigest {
			t.Fatalf("picked %q at %s; want %s at %s", got, rec.Digest, c.want, idxDigest)
		}
	}
	if _, err := m.PushIndex(ctx, reg.ref("out:2"), map[Platform]string{fbsd: "sha256:" + strings.Repeat("0", 64)}, nil); err == nil {
		t.Fatal("an index naming a missing manifest was pushed")
	}
}

func TestKeptBlobsGoOutAsTheyCame(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	base := layerOf(t, "gzip", ent{name: "a", body: "a"})
	img := imageOf(t, p, base, layerOf(t, "zstd", ent{name: "b", body: "b"}))
	pushImage(t, reg.ref("src:1"), img)
	// The base is in the store already, from a pull that kept no blobs.
	pushImage(t, reg.ref("base:1"), imageOf(t, p, base))
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "s"))
	plain, err := Open(Options{DataDir: dir, Store: ds, Platform: freebsdAmd64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Pull(ctx, reg.ref("base:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Options{DataDir: dir, Store: ds, Platform: freebsdAmd64, KeepBlobs: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.Pull(ctx, reg.ref("src:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, err := m.Push(ctx, reg.ref("src:1"), reg.ref("copy:1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != want.String() {
		t.Fatalf("pushed as %s; want the image as it came, %s", got, want)
	}
	var archive bytes.Buffer
	if err := m.Export(ctx, reg.ref("src:1"), &archive); err != nil {
		t.Fatal(err)
	}
	m2, _, _ := newImages(t, freebsdAmd64)
	recs, err := m2.Load(ctx, &archive, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Digest != want.String() || len(recs[0].Layers) != 2 {
		t.Fatalf("exported %s with %d layers; want %s with 2", recs[0].Digest, len(recs[0].Layers), want)
	}
	// Removing the image lets the blobs only it names go; the base's
	// stays while base:1 names it.
	if _, err := m.Remove(ctx, reg.ref("src:1")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rec.Manifest, rec.ConfigDigest, rec.Layers[1].Digest} {
		if m.hasBlob(d) {
			t.Fatalf("blob %s kept after its image went", d)
		}
	}
	if !m.hasBlob(rec.Layers[0].Digest) {
		t.Fatal("the base layer's blob went while base:1 names it")
	}
}
