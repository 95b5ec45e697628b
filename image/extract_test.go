package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

// tree lists the files under root as "path" or "path -> link".
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			rel += " -> " + l
		} else if fi.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

func apply(t *testing.T, root string, opts ApplyOptions, ents ...ent) error {
	t.Helper()
	return ApplyLayer(context.Background(), root, bytes.NewReader(tarBytes(t, ents)), opts)
}

func TestWhiteoutsAndOpaqueDirsAcrossTwoLayers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	lower := layerOf(t, "gzip",
		ent{name: "a/", typ: tar.TypeDir},
		ent{name: "a/keep", body: "k"},
		ent{name: "a/gone", body: "g"},
		ent{name: "a/gonedir/", typ: tar.TypeDir},
		ent{name: "a/gonedir/f", body: "f"},
		ent{name: "opq/", typ: tar.TypeDir},
		ent{name: "opq/x", body: "x"},
		ent{name: "opq/sub/", typ: tar.TypeDir},
		ent{name: "opq/sub/y", body: "y"},
		ent{name: "etc", typ: tar.TypeSymlink, link: "/etc"},
	)
	upper := layerOf(t, "gzip",
		ent{name: "a/.wh.gone"},
		ent{name: "a/.wh.gonedir"},
		ent{name: "opq/", typ: tar.TypeDir},
		ent{name: "opq/.wh..wh..opq"},
		ent{name: "opq/new", body: "n"},
		ent{name: ".wh.etc"}, // removes the link itself, never /etc
	)
	pushImage(t, reg.ref("wh:1"), imageOf(t, p, lower, upper))
	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("wh:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/", "a/keep", "opq/", "opq/new"}
	if d := cmp.Diff(want, tree(t, ds.LayerDir(rec.TopChainID()))); d != "" {
		t.Fatalf("top layer (-want +got):\n%s", d)
	}
	// The lower layer is untouched: each layer is its own copy.
	wantLower := []string{"a/", "a/gone", "a/gonedir/", "a/gonedir/f", "a/keep", "etc -> /etc", "opq/", "opq/sub/", "opq/sub/y", "opq/x"}
	if d := cmp.Diff(wantLower, tree(t, ds.LayerDir(rec.Layers[0].ChainID))); d != "" {
		t.Fatalf("lower layer (-want +got):\n%s", d)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("the whiteout followed the link: %v", err)
	}
}

func TestUnsafeLayersRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ents []ent
	}{
		{"dot-dot file", []ent{{name: "ok", body: "1"}, {name: "../evil", body: "x"}}},
		{"dot-dot inside", []ent{{name: "a/../../evil", body: "x"}}},
		{"write through a link", []ent{{name: "s", typ: tar.TypeSymlink, link: "../outside"}, {name: "s/evil", body: "x"}}},
		{"write through an absolute link", []ent{{name: "s", typ: tar.TypeSymlink, link: "/"}, {name: "s/tmp/evil", body: "x"}}},
		// Extraction remembers the directories it went through: one
		// replaced by a link is forgotten.
		{"write through a link that replaced a directory", []ent{{name: "s/", typ: tar.TypeDir}, {name: "s/d/", typ: tar.TypeDir}, {name: "s/d/ok", body: "1"}, {name: "s", typ: tar.TypeSymlink, link: "../outside"}, {name: "s/evil", body: "x"}}},
		{"write through a link that replaced a subdirectory", []ent{{name: "s/d/ok", body: "1"}, {name: "s", typ: tar.TypeSymlink, link: "../outside"}, {name: "s/d/evil", body: "x"}}},
		{"hard link out", []ent{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}}},
		{"hard link through a link", []ent{{name: "s", typ: tar.TypeSymlink, link: "../outside"}, {name: "h", typ: tar.TypeLink, link: "s/secret"}}},
		{"whiteout through a link", []ent{{name: "s", typ: tar.TypeSymlink, link: "../outside"}, {name: "s/.wh.secret"}}},
		{"whiteout of dot-dot", []ent{{name: "a/.wh..."}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "root")
			outside := filepath.Join(dir, "outside")
			os.Mkdir(root, 0o755)
			os.Mkdir(outside, 0o755)
			os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
			// A lower layer may already hold the link.
			if c.name == "whiteout through a link" {
				os.Symlink("../outside", filepath.Join(root, "s"))
				c.ents = c.ents[1:]
			}
			err := apply(t, root, ApplyOptions{}, c.ents...)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("got %v; want ErrUnsafePath", err)
			}
			if d := cmp.Diff([]string{"secret"}, tree(t, outside)); d != "" {
				t.Fatalf("outside changed (-want +got):\n%s", d)
			}
			if exists(filepath.Join(dir, "evil")) {
				t.Fatal("a file was written outside the root")
			}
		})
	}
}

func TestUnsafeLayerPullStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	bad := layerOf(t, "gzip", ent{name: "s", typ: tar.TypeSymlink, link: "/"}, ent{name: "s/evil", body: "x"})
	pushImage(t, reg.ref("escape:1"), imageOf(t, p, bad))
	m, ds, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, reg.ref("escape:1"), PullOptions{Now: t0}); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("got %v; want ErrUnsafePath", err)
	}
	if exists("/evil") {
		t.Fatal("/evil written")
	}
	ents, _ := os.ReadDir(filepath.Join(ds.dir, "layers"))
	if len(ents) != 0 {
		t.Fatalf("layers directory holds %v after a refused layer", ents)
	}
}

func TestReplacingKeepsTypesStraight(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := apply(t, root, ApplyOptions{},
		ent{name: "x/", typ: tar.TypeDir}, ent{name: "x/f", body: "1"},
		ent{name: "y", body: "file"},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555}, ent{name: "ro/f", body: "in a read-only dir"},
	); err != nil {
		t.Fatal(err)
	}
	// A file replaces a directory, a directory a file, a link a file.
	if err := apply(t, root, ApplyOptions{},
		ent{name: "x", body: "now a file"},
		ent{name: "y/", typ: tar.TypeDir}, ent{name: "y/z", body: "z"},
		ent{name: "ro/f", typ: tar.TypeSymlink, link: "elsewhere"},
	); err != nil {
		t.Fatal(err)
	}
	want := []string{"ro/", "ro/f -> elsewhere", "x", "y/", "y/z"}
	if d := cmp.Diff(want, tree(t, root)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if fi, _ := os.Stat(filepath.Join(root, "ro")); fi.Mode().Perm() != 0o555 {
		t.Fatalf("ro mode %v; want 0555", fi.Mode())
	}
}

func TestFileFlagsThroughRunner(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "lib"), 0o755)
	os.WriteFile(filepath.Join(root, "lib/libc.so.7"), []byte("old"), 0o444)
	os.MkdirAll(filepath.Join(root, "var/empty"), 0o755)
	f := sys.NewFake()
	err := apply(t, root, ApplyOptions{Flags: RunnerFlags{Runner: f}},
		ent{name: "lib/.wh.libc.so.7"},
		ent{name: "var/.wh.empty"},
		ent{name: "lib/libc.so.7", body: "new", mode: 0o444, pax: map[string]string{"SCHILY.fflags": "schg"}},
		ent{name: "bin/", typ: tar.TypeDir},
		ent{name: "bin/su", body: "su", mode: 0o4555, pax: map[string]string{"SCHILY.fflags": "schg"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"chflags -h noschg,nouchg,nosappnd,nouappnd,nosunlnk,nouunlnk " + filepath.Join(root, "lib/libc.so.7"),
		"chflags -R noschg,nouchg,nosappnd,nouappnd,nosunlnk,nouunlnk " + filepath.Join(root, "var/empty"),
		"chflags -h schg " + filepath.Join(root, "lib/libc.so.7"),
		"chflags -h schg " + filepath.Join(root, "bin/su"),
	}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Fatalf("chflags commands (-want +got):\n%s", d)
	}
	if got := readFile(t, filepath.Join(root, "lib/libc.so.7")); got != "new" {
		t.Fatalf("libc = %q", got)
	}
	// A refusal from chflags stops the layer.
	f2 := sys.NewFake().On("chflags", sys.Answer{Stderr: "chflags: Operation not permitted", Code: 1})
	err = apply(t, root, ApplyOptions{Flags: RunnerFlags{Runner: f2}}, ent{name: "lib/.wh.libc.so.7"})
	if err == nil || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("got %v; want the chflags refusal", err)
	}
}

func TestXattrsKeptWherePossible(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	err := apply(t, root, ApplyOptions{}, ent{name: "f", body: "x", pax: map[string]string{"SCHILY.xattr.user.legion": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := getxattr(filepath.Join(root, "f"), "user.legion", buf)
	if err != nil {
		t.Skipf("this file system keeps no user xattrs: %v", err)
	}
	if string(buf[:n]) != "yes" {
		t.Fatalf("xattr = %q", buf[:n])
	}
}

func TestDirStoreClearsFlagsBeforeRemoving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake()
	ds, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ds.WithFlags(RunnerFlags{Runner: f})
	chain := "sha256:" + strings.Repeat("e", 64)
	p, err := ds.BeginLayer(ctx, chain, "")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p.Dir(), "f"), []byte("x"), 0o644)
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds.RemoveLayer(ctx, chain); err != nil {
		t.Fatal(err)
	}
	want := []string{"chflags -R noschg,nouchg,nosappnd,nouappnd,nosunlnk,nouunlnk " + ds.LayerDir(chain)}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if exists(ds.LayerDir(chain)) {
		t.Fatal("layer not removed")
	}
	// Removing what is not there runs nothing.
	f.Reset()
	if err := ds.RemoveLayer(ctx, chain); err != nil || len(f.Lines()) != 0 {
		t.Fatalf("second removal: %v, ran %v", err, f.Lines())
	}
}

func TestFifoAndOwnersAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("owners and special files need root")
	}
	root := t.TempDir()
	err := apply(t, root, ApplyOptions{Owners: true},
		ent{name: "run/", typ: tar.TypeDir},
		ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o620, uid: 5, gid: 6},
		ent{name: "run/link", typ: tar.TypeSymlink, link: "fifo", uid: 7, gid: 8},
		ent{name: "sgid", body: "x", mode: 0o2755, uid: 9, gid: 10},
	)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(root, "run/fifo"))
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o620 {
		t.Fatalf("fifo: %v %v", fi.Mode(), err)
	}
	for p, want := range map[string][2]int{"run/fifo": {5, 6}, "run/link": {7, 8}, "sgid": {9, 10}} {
		if got := statOwner(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s owner %v; want %v", p, got, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(root, "sgid")); fi.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("sgid lost its bit after chown: %v", fi.Mode())
	}
}

// A directory entry, then a link in its place: the directory's mode and
// times, set once everything is written, are not set through the link
// (they once were: a layer could make any directory of the host 0777).
func TestDirectoryReplacedByLinkKeepsOutsideAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	os.Mkdir(root, 0o755)
	os.Mkdir(outside, 0o700)
	os.Mkdir(filepath.Join(outside, "sub"), 0o700)
	f := sys.NewFake()
	err := apply(t, root, ApplyOptions{Flags: RunnerFlags{Runner: f}},
		ent{name: "s/", typ: tar.TypeDir, mode: 0o777},
		ent{name: "d/", typ: tar.TypeDir},
		ent{name: "d/sub/", typ: tar.TypeDir, mode: 0o777},
		ent{name: "d/sub/f", body: "x", pax: map[string]string{paxFlags: "schg"}},
		ent{name: "s", typ: tar.TypeSymlink, link: "../outside"},
		ent{name: "d", typ: tar.TypeSymlink, link: "../outside"},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, filepath.Join(outside, "sub")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s is now %v: a mode was set through a link", p, fi.Mode())
		}
	}
	if lines := f.Lines(); len(lines) != 0 {
		t.Fatalf("file flags set through a link: %v", lines)
	}
	if d := cmp.Diff([]string{"d -> ../outside", "s -> ../outside"}, tree(t, root)); d != "" {
		t.Fatalf("root (-want +got):\n%s", d)
	}
}
