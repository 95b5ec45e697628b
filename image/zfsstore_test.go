package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
	"github.com/legionbsd/legion/zfs"
)

// TestZFSStorePullCloneRemove pulls a two-layer image into the ZFS store
// with a fake zfs(8) whose "mountpoints" are temporary directories, and
// checks the exact commands for the pull, a container clone and removal.
func TestZFSStorePullCloneRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	l0 := layerOf(t, "gzip", ent{name: "base", body: "b"})
	l1 := layerOf(t, "gzip", ent{name: "app", body: "a"})
	img := imageOf(t, p, l0, l1)
	pushImage(t, reg.ref("app:1"), img)
	cf, _ := img.ConfigFile()
	chains, _ := ChainIDs([]string{cf.RootFS.DiffIDs[0].String(), cf.RootFS.DiffIDs[1].String()})
	c0, c1 := hexOf(chains[0]), hexOf(chains[1])

	mnt := t.TempDir()
	for _, d := range []string{c0, c1} {
		os.MkdirAll(filepath.Join(mnt, d), 0o755)
	}
	f := sys.NewFake()
	notExist := func(ds string) sys.Answer {
		return sys.Answer{Stderr: "cannot open '" + ds + "': dataset does not exist\n", Code: 1}
	}
	f.On("zfs list -H -o name -t snapshot", notExist("x"))
	f.On("zfs destroy -r tank/legion/images/", notExist("x"))
	f.On("zfs get -H -p -o value mountpoint tank/legion/images/"+c0, sys.Answer{Stdout: filepath.Join(mnt, c0) + "\n"})
	f.On("zfs get -H -p -o value mountpoint tank/legion/images/"+c1, sys.Answer{Stdout: filepath.Join(mnt, c1) + "\n"})

	dir := t.TempDir()
	store := NewZFSStore(zfs.New(f), "tank/legion")
	m, err := Open(Options{DataDir: dir, Store: store, Platform: freebsdAmd64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pull(ctx, reg.ref("app:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	I := "tank/legion/images/"
	// The next layer is looked up and fetched while the last is written,
	// so the commands of the two layers interleave: each layer's own are
	// in order, and a layer is cloned only after its parent's snapshot.
	want := map[string][]string{
		I + c0: {
			"zfs list -H -o name -t snapshot " + I + c0 + "@layer",
			"zfs destroy -r " + I + c0,
			"zfs create -p " + I + c0,
			"zfs get -H -p -o value mountpoint " + I + c0,
			"zfs snapshot " + I + c0 + "@layer",
		},
		I + c1: {
			"zfs list -H -o name -t snapshot " + I + c1 + "@layer",
			"zfs destroy -r " + I + c1,
			"zfs clone " + I + c0 + "@layer " + I + c1,
			"zfs get -H -p -o value mountpoint " + I + c1,
			"zfs snapshot " + I + c1 + "@layer",
		},
		"tank/legion/images": {"zfs create -p tank/legion/images", "zfs create -p tank/legion/images"},
	}
	lines := f.Lines()
	if d := cmp.Diff(want, byDataset(lines)); d != "" {
		t.Fatalf("pull commands (-want +got):\n%s", d)
	}
	if lineIndex(lines, "zfs clone "+I+c0+"@layer "+I+c1) < lineIndex(lines, "zfs snapshot "+I+c0+"@layer") {
		t.Fatalf("layer 1 cloned before layer 0 was complete:\n%s", strings.Join(lines, "\n"))
	}
	if got := readFile(t, filepath.Join(mnt, c1, "app")); got != "a" {
		t.Fatalf("layer 1 not extracted into its mountpoint: %q", got)
	}

	// A container root is a clone of the top layer; the same id again
	// adopts the existing clone.
	f.Reset()
	f.Once("zfs clone", sys.Answer{})
	f.On("zfs clone", sys.Answer{Stderr: "cannot create 'tank/legion/containers/c1': dataset already exists\n", Code: 1})
	f.On("zfs get -H -p -o value mountpoint tank/legion/containers/c1", sys.Answer{Stdout: "/tank/legion/containers/c1\n"})
	for i := 0; i < 2; i++ {
		root, err := m.PrepareRoot(ctx, "c1", reg.ref("app:1"), "", t0)
		if err != nil || root != "/tank/legion/containers/c1" {
			t.Fatalf("PrepareRoot = %q, %v", root, err)
		}
	}
	wantRoot := []string{
		"zfs create -p tank/legion/containers",
		"zfs clone " + I + c1 + "@layer tank/legion/containers/c1",
		"zfs get -H -p -o value mountpoint tank/legion/containers/c1",
	}
	if d := cmp.Diff(append(wantRoot, wantRoot...), f.Lines()); d != "" {
		t.Fatalf("root commands (-want +got):\n%s", d)
	}

	// Removing the image while the container lives keeps the layer it was
	// cloned from, and the one below it.
	// (Fake rules stay after Reset, so this phase's answers are Once.)
	f.Reset()
	f.Once("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/containers",
		sys.Answer{Stdout: "tank/legion/containers\t-\t/c\ntank/legion/containers/c1\t" + I + c1 + "@layer\t/c/c1\n"})
	f.Once("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/images",
		sys.Answer{Stdout: "tank/legion/images\t-\t/i\n" + I + c0 + "\t-\t/i/" + c0 + "\n" + I + c1 + "\t" + I + c0 + "@layer\t/i/" + c1 + "\n"})
	removed, err := m.Remove(ctx, reg.ref("app:1"))
	if err != nil || len(removed) != 0 {
		t.Fatalf("Remove = %v, %v; want no layer removed while c1 lives", removed, err)
	}
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "zfs destroy") {
			t.Fatalf("destroyed %q while a container uses it", l)
		}
	}

	// Once the container is gone, the layers go, top first.
	f.Reset()
	f.On("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/containers", notExist("tank/legion/containers"))
	f.On("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/images",
		sys.Answer{Stdout: I + c0 + "\t-\t/i/" + c0 + "\n" + I + c1 + "\t" + I + c0 + "@layer\t/i/" + c1 + "\n"})
	if err := m.RemoveRoot(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	res, err := m.GC(ctx, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{chains[1], chains[0]}, res.Layers); d != "" {
		t.Fatalf("removed layers (-want +got):\n%s", d)
	}
	wantGC := []string{
		"zfs destroy -r tank/legion/containers/c1",
		"zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/containers",
		"zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/legion/images",
		"zfs destroy -r " + I + c1,
		"zfs destroy -r " + I + c0,
	}
	if d := cmp.Diff(wantGC, f.Lines()); d != "" {
		t.Fatalf("gc commands (-want +got):\n%s", d)
	}
}

func TestZFSStoreErrorAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chain := "sha256:" + strings.Repeat("ab", 32)
	ds := "tank/images/" + strings.Repeat("ab", 32)

	// A layer with clones (a container or a layer above) stays.
	f := sys.NewFake().On("zfs destroy -r "+ds, sys.Answer{Stderr: "cannot destroy '" + ds + "': filesystem has dependent clones\nuse '-R' to destroy the following datasets:\ntank/containers/c9\n", Code: 1})
	s := NewZFSStore(zfs.New(f), "tank")
	if err := s.RemoveLayer(ctx, chain); !errors.Is(err, ErrLayerInUse) {
		t.Fatalf("RemoveLayer = %v; want ErrLayerInUse", err)
	}
	// A clone failing for another reason fails the layer and leaves
	// nothing half made.
	f = sys.NewFake()
	f.On("zfs clone", sys.Answer{Stderr: "cannot open 'tank/images/p@layer': dataset does not exist\n", Code: 1})
	s = NewZFSStore(zfs.New(f), "tank")
	if _, err := s.BeginLayer(ctx, chain, "sha256:"+strings.Repeat("cd", 32)); !errors.Is(err, zfs.ErrNotFound) {
		t.Fatalf("BeginLayer = %v; want the missing parent", err)
	}
	// A dataset without mountpoint is refused and destroyed.
	f = sys.NewFake().On("zfs get", sys.Answer{Stdout: "legacy\n"})
	s = NewZFSStore(zfs.New(f), "tank")
	if _, err := s.BeginLayer(ctx, chain, ""); err == nil {
		t.Fatal("legacy mountpoint accepted")
	}
	lines := f.Lines()
	if last := lines[len(lines)-1]; last != "zfs destroy -r "+ds {
		t.Fatalf("last command %q; want the half-made layer destroyed", last)
	}
	// Missing roots list as empty.
	f = sys.NewFake().On("zfs list", sys.Answer{Stderr: "cannot open 'tank/containers': dataset does not exist\n", Code: 1})
	s = NewZFSStore(zfs.New(f), "tank")
	if r, err := s.Roots(ctx); err != nil || len(r) != 0 {
		t.Fatalf("Roots = %v, %v", r, err)
	}
}

// byDataset groups command lines by the dataset they act on (their last
// word, without a snapshot name), keeping each group's order.
func byDataset(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		w := strings.Fields(l)
		ds, _, _ := strings.Cut(w[len(w)-1], "@")
		out[ds] = append(out[ds], l)
	}
	return out
}

func lineIndex(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}
