package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func diffEntries(t *testing.T, lower, upper string) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := Diff(context.Background(), lower, upper, &buf); err != nil {
		t.Fatal(err)
	}
	var out []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		s := h.Name
		if h.Typeflag == tar.TypeLink {
			s += " link " + h.Linkname
		}
		out = append(out, s)
	}
}

func TestDiffTrees(t *testing.T) {
	t.Parallel()
	lower := t.TempDir()
	mkTree := func(root string) {
		os.MkdirAll(filepath.Join(root, "etc"), 0o755)
		os.MkdirAll(filepath.Join(root, "var/db"), 0o755)
		os.WriteFile(filepath.Join(root, "etc/keep"), []byte("k"), 0o644)
		os.WriteFile(filepath.Join(root, "etc/change"), []byte("old"), 0o644)
		os.WriteFile(filepath.Join(root, "etc/chmod"), []byte("m"), 0o644)
		os.WriteFile(filepath.Join(root, "var/db/gone"), []byte("g"), 0o644)
		os.Symlink("keep", filepath.Join(root, "etc/link"))
		for _, p := range []string{"etc/keep", "etc/change", "etc/chmod", "var/db/gone", "etc", "var", "var/db"} {
			os.Chtimes(filepath.Join(root, p), t0, t0)
		}
	}
	mkTree(lower)
	upper := t.TempDir()
	if err := copyTree(lower, upper, os.Geteuid() == 0, nil, false); err != nil {
		t.Fatal(err)
	}
	if d := diffEntries(t, lower, upper); len(d) != 0 {
		t.Fatalf("a copy differs: %v", d)
	}
	os.WriteFile(filepath.Join(upper, "etc/change"), []byte("new content"), 0o644)
	os.Chmod(filepath.Join(upper, "etc/chmod"), 0o600)
	os.RemoveAll(filepath.Join(upper, "var/db"))
	os.Remove(filepath.Join(upper, "etc/link"))
	os.Symlink("change", filepath.Join(upper, "etc/link"))
	os.MkdirAll(filepath.Join(upper, "usr/bin"), 0o755)
	os.WriteFile(filepath.Join(upper, "usr/bin/a"), []byte("a"), 0o755)
	os.Link(filepath.Join(upper, "usr/bin/a"), filepath.Join(upper, "usr/bin/b"))
	got := diffEntries(t, lower, upper)
	want := []string{
		"etc/change", "etc/chmod", "etc/link",
		"usr/", "usr/bin/", "usr/bin/a", "usr/bin/b link usr/bin/a",
		"var/.wh.db",
	}
	// The directories whose entries changed carry new times too.
	var filtered []string
	for _, g := range got {
		if g != "etc/" && g != "var/" {
			filtered = append(filtered, g)
		}
	}
	if d := cmp.Diff(want, filtered); d != "" {
		t.Fatalf("diff (-want +got):\n%s\nall: %v", d, got)
	}
}

func TestCommitBuiltImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("base:1"), imageOf(t, p,
		layerOf(t, "gzip", ent{name: "etc/", typ: tar.TypeDir}, ent{name: "etc/motd", body: "base"}, ent{name: "etc/rc.conf", body: "rc"}, ent{name: "bin/sh", body: "sh", mode: 0o755})))
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "s"))
	m, err := Open(Options{DataDir: dir, Store: ds, Platform: freebsdAmd64, KeepBlobs: true})
	if err != nil {
		t.Fatal(err)
	}
	base, err := m.Pull(ctx, reg.ref("base:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	root, err := m.PrepareRoot(ctx, "build-1", reg.ref("base:1"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	// A build step's work.
	os.WriteFile(filepath.Join(root, "etc/motd"), []byte("built on legion\n"), 0o644)
	os.Remove(filepath.Join(root, "etc/rc.conf"))
	os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/local/bin/app"), []byte("app"), 0o4755)
	os.Chmod(filepath.Join(root, "usr/local/bin/app"), 0o4755|os.ModeSetuid)

	rec, err := m.Commit(ctx, "localhost/built:1", root, CommitOptions{
		Base: reg.ref("base:1"), CreatedBy: "RUN make install", Now: t0,
		Configure: func(c *Config) { c.Config.Cmd = []string{"/usr/local/bin/app"} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Layers) != 2 || rec.Layers[0].ChainID != base.Layers[0].ChainID || !rec.Local {
		t.Fatalf("built %+v; want the base layer and one more, local", rec.Layers)
	}
	if d := cmp.Diff(tree(t, root), tree(t, ds.LayerDir(rec.TopChainID()))); d != "" {
		t.Fatalf("stored layer differs from the built root (-root +layer):\n%s", d)
	}
	cfg, _ := rec.ParsedConfig()
	if !cmp.Equal(cfg.Config.Cmd, []string{"/usr/local/bin/app"}) || len(cfg.RootFS.DiffIDs) != 2 {
		t.Fatalf("config %+v", cfg)
	}
	// Pushed as built, pulled elsewhere the same.
	digest, err := m.Push(ctx, "localhost/built:1", reg.ref("built:1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if digest != rec.Digest {
		t.Fatalf("pushed %s; want the built manifest %s", digest, rec.Digest)
	}
	m2, ds2, _ := newImages(t, freebsdAmd64)
	got, err := m2.Pull(ctx, reg.ref("built:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tree(t, root), tree(t, ds2.LayerDir(got.TopChainID()))); d != "" {
		t.Fatalf("pulled image differs (-root +pulled):\n%s", d)
	}
	if fi, _ := os.Stat(filepath.Join(ds2.LayerDir(got.TopChainID()), "usr/local/bin/app")); fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("setuid lost: %v", fi.Mode())
	}
	// Without kept blobs there is no commit.
	plain, _, _ := newImages(t, freebsdAmd64)
	if _, err := plain.Commit(ctx, "localhost/x:1", root, CommitOptions{Base: reg.ref("base:1"), Now: t0}); err == nil {
		t.Fatal("committed without kept blobs")
	}
}

func TestCommitFromScratch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "s"))
	m, err := Open(Options{DataDir: dir, Store: ds, Platform: freebsdAmd64, KeepBlobs: true})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "hello"), []byte("hi"), 0o644)
	if _, err := m.Commit(ctx, "localhost/s:1", root, CommitOptions{Now: t0}); err == nil {
		t.Fatal("a scratch commit without a platform accepted")
	}
	rec, err := m.Commit(ctx, "localhost/s:1", root, CommitOptions{Platform: Platform{OS: "freebsd", Arch: "amd64"}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ds.LayerDir(rec.TopChainID()), "hello")); got != "hi" {
		t.Fatalf("hello = %q", got)
	}
	var buf bytes.Buffer
	if err := m.Export(ctx, "localhost/s:1", &buf); err != nil {
		t.Fatal(err)
	}
	m2, _, _ := newImages(t, freebsdAmd64)
	recs, err := m2.Load(ctx, &buf, "", t0)
	if err != nil || recs[0].Digest != rec.Digest {
		t.Fatalf("exported and loaded %v, %v; want %s", recs, err, rec.Digest)
	}
}
