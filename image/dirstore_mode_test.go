package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A layer without a "./" entry still gives a root of mode 0755, so a
// container running as a user other than root can reach its files.
func TestDirStoreRootIsNotPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newDirStore(t, t.TempDir())
	const chain = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	p, err := s.BeginLayer(ctx, chain, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.Dir()+"/app", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	root, err := s.PrepareRoot(ctx, "c1", chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{s.LayerDir(chain), root} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is %v, want 0755", dir, fi.Mode().Perm())
		}
	}
}

// testLayer commits a one-layer tree holding etc/motd and bin/tool.
func testLayer(t *testing.T, s *DirStore, chain string) {
	t.Helper()
	ctx := context.Background()
	p, err := s.BeginLayer(ctx, chain, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"etc/motd": "hello", "bin/tool": "tool"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(p.Dir(), name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.Dir(), name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A root, copied or an overlay, is the container's own: what it writes,
// replaces or deletes leaves the layer as it was, stays across a second
// PrepareRoot, and goes with RemoveRoot, after which the layer can go.
func TestDirStoreRootIsTheContainersOwn(t *testing.T) {
	t.Parallel()
	modes := map[string]bool{"copied": true}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		modes["overlay"] = false
	}
	for mode, copies := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newDirStore(t, t.TempDir())
			s.copyRoots = copies
			const chain = "sha256:0000000000000000000000000000000000000000000000000000000000000002"
			testLayer(t, s, chain)
			root, err := s.PrepareRoot(ctx, "c1", chain)
			if err != nil {
				t.Fatal(err)
			}
			if on, err := mountedOver(root); err != nil || on == copies {
				t.Fatalf("root mounted over: %v, %v; want %v", on, err, !copies)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/motd"), []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(root, "bin/tool")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "new"), []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			layer := s.LayerDir(chain)
			if got := readFile(t, filepath.Join(layer, "etc/motd")); got != "hello" {
				t.Fatalf("layer's etc/motd = %q after the container wrote its own", got)
			}
			if !exists(filepath.Join(layer, "bin/tool")) || exists(filepath.Join(layer, "new")) {
				t.Fatal("the container's delete or new file reached the layer")
			}
			if again, err := s.PrepareRoot(ctx, "c1", chain); err != nil || again != root {
				t.Fatalf("PrepareRoot again = %q, %v", again, err)
			}
			if got := readFile(t, filepath.Join(root, "etc/motd")); got != "changed" {
				t.Fatalf("root's etc/motd = %q after PrepareRoot again", got)
			}
			err = s.RemoveLayer(ctx, chain)
			if copies && err != nil {
				t.Fatalf("removing the layer of a copied root: %v", err)
			}
			if !copies {
				if !errors.Is(err, ErrLayerInUse) {
					t.Fatalf("removing the layer under an overlay root = %v, want ErrLayerInUse", err)
				}
				testLayer(t, s, chain) // still there
			}
			if err := s.RemoveRoot(ctx, "c1"); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(filepath.Join(s.dir, "roots"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() != ".rw" {
					t.Errorf("left in roots: %s", e.Name())
				}
			}
			if rw, _ := os.ReadDir(filepath.Join(s.dir, "roots", ".rw")); len(rw) != 0 {
				t.Errorf("left in roots/.rw: %v", rw)
			}
			if err := s.RemoveLayer(ctx, chain); err != nil {
				t.Fatalf("removing the layer once no root uses it: %v", err)
			}
		})
	}
}

// An overlay root found unmounted, as after the host restarted, is
// mounted again, with what the container had written, by the store
// opened again (a daemon starting) and by PrepareRoot.
func TestDirStoreOverlayRootMountedAgain(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("overlay roots are made on Linux as root")
	}
	ctx := context.Background()
	s := newDirStore(t, t.TempDir())
	const chain = "sha256:0000000000000000000000000000000000000000000000000000000000000003"
	testLayer(t, s, chain)
	root, err := s.PrepareRoot(ctx, "c1", chain)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/motd"), []byte("written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unmountOverlay(root); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(root, "etc")) {
		t.Fatal("the root's files are still seen once unmounted")
	}
	mountedAgain := func(how string) {
		t.Helper()
		if got := readFile(t, filepath.Join(root, "etc/motd")); got != "written" {
			t.Fatalf("etc/motd = %q once mounted again by %s, want what the container wrote", got, how)
		}
		if got := readFile(t, filepath.Join(root, "bin/tool")); got != "tool" {
			t.Fatalf("bin/tool = %q once mounted again by %s", got, how)
		}
		if err := unmountOverlay(root); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewDirStore(s.dir); err != nil {
		t.Fatal(err)
	}
	mountedAgain("NewDirStore")
	// A root left half made (its writable part and record, no mount
	// point) is made anew.
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PrepareRoot(ctx, "c1", chain); err != nil {
		t.Fatalf("PrepareRoot over a root left half made: %v", err)
	}
	if got := readFile(t, filepath.Join(root, "etc/motd")); got != "hello" {
		t.Fatalf("etc/motd = %q in a root made anew, want the layer's", got)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/motd"), []byte("written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unmountOverlay(root); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PrepareRoot(ctx, "c1", chain); err != nil {
		t.Fatal(err)
	}
	mountedAgain("PrepareRoot")
}

// A probe a killed process left mounted (between the probe's mount and
// its unmount) is unmounted and removed by the next process's probe: the
// daemon's kill -9 test found one left behind for good.
func TestDirStoreProbeLeftMountedIsSwept(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("overlay roots are made on Linux as root")
	}
	s := newDirStore(t, t.TempDir())
	left := filepath.Join(s.dir, "roots", ".tmp-probe-123")
	for _, d := range []string{"lower", "upper", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(left, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(left, "root")
	t.Cleanup(func() { unmountOverlay(root) })
	if err := mountOverlay(filepath.Join(left, "lower"), filepath.Join(left, "upper"), filepath.Join(left, "work"), root); err != nil {
		t.Skipf("overlayfs refused the mount here: %v", err)
	}
	if !s.overlays() {
		t.Fatal("the probe says overlay roots cannot be made, though one was just mounted")
	}
	if exists(left) {
		t.Fatalf("%s, mounted by an earlier process's probe, is still there", left)
	}
	probes, err := filepath.Glob(filepath.Join(s.dir, "roots", ".tmp-probe-*"))
	if err != nil || len(probes) != 0 {
		t.Fatalf("probes left: %v %v", probes, err)
	}
}
