//go:build freebsd && live

package image

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion/sys"
	"github.com/legionbsd/legion/zfs"
)

// TestLiveZFSStore runs the ZFS store on a file-backed pool of its own,
// as the spec's lab did: a pull of two layers with a whiteout and a schg
// file, a container clone, and removal honouring the clone.
func TestLiveZFSStore(t *testing.T) {
	ctx := context.Background()
	if os.Geteuid() != 0 {
		t.Fatal("the live ZFS test needs root")
	}
	dir := t.TempDir()
	vdev := filepath.Join(dir, "pool.img")
	pool := "legiontest" + strings.ReplaceAll(filepath.Base(dir), "-", "")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	run("truncate", "-s", "512m", vdev)
	run("zpool", "create", "-m", filepath.Join(dir, "mnt"), pool, vdev)
	t.Cleanup(func() { exec.Command("zpool", "destroy", "-f", pool).Run() })

	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("live:1"), imageOf(t, p,
		layerOf(t, "gzip", ent{name: "lib/", typ: tar.TypeDir}, ent{name: "lib/libc.so.7", body: "libc", mode: 0o444, pax: map[string]string{"SCHILY.fflags": "schg"}}, ent{name: "etc/old", body: "o"}),
		layerOf(t, "zstd", ent{name: "etc/.wh.old"}, ent{name: "lib/.wh.libc.so.7"}, ent{name: "lib/libc.so.7", body: "libc2", mode: 0o444}),
	))
	store := NewZFSStore(zfs.New(sys.Exec{}), pool+"/legion")
	m, err := Open(Options{DataDir: filepath.Join(dir, "data"), Store: store, Platform: freebsdAmd64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rec, err := m.Pull(ctx, reg.ref("live:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	root, err := m.PrepareRoot(ctx, "c1", reg.ref("live:1"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "lib/libc.so.7")); got != "libc2" {
		t.Fatalf("libc = %q", got)
	}
	if exists(filepath.Join(root, "etc/old")) {
		t.Fatal("whiteout not applied")
	}
	if _, err := m.Remove(ctx, reg.ref("live:1")); err != nil {
		t.Fatal(err)
	}
	layers := storedLayers(t, store)
	if len(layers) != 2 {
		t.Fatalf("layers %v; want both kept while c1 lives", layers)
	}
	if err := m.RemoveRoot(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	res, err := m.GC(ctx, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layers) != 2 || res.Layers[0] != rec.TopChainID() {
		t.Fatalf("removed %v; want the top layer, then its parent", res.Layers)
	}
}
