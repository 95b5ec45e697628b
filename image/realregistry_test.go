package image

import (
	"context"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/legionbsd/legion/image/internal/regtest"
)

func TestDistributionRegistry(t *testing.T) {
	ctx := context.Background()
	host := regtest.Distribution(t)
	fbsd, lin := Platform{OS: "freebsd", Arch: "amd64"}, Platform{OS: "linux", Arch: "amd64"}
	base := layerOf(t, "gzip", ent{name: "base", body: "shared"})
	fi := imageOf(t, fbsd, base, layerOf(t, "zstd", ent{name: "os", body: "freebsd"}))
	li := imageOf(t, lin, base, layerOf(t, "gzip", ent{name: "os", body: "linux"}))
	idx := indexOf(t, map[Platform]v1.Image{fbsd: fi, lin: li})
	pushIndex(t, host+"/multi/app:1", idx)
	pushIndex(t, host+"/linux/app:1", indexOf(t, map[Platform]v1.Image{lin: li}))

	m, ds, _ := newImages(t, PlatformRule{Arch: "amd64"})
	want, _ := idx.Digest()
	got, err := m.Resolve(ctx, host+"/multi/app:1", nil)
	if err != nil || got != want.String() {
		t.Fatalf("Resolve = %s, %v; want %s", got, err, want)
	}
	rec, err := m.Pull(ctx, host+"/multi/app@"+got, PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, filepath.Join(ds.LayerDir(rec.TopChainID()), "os")); s != "freebsd" {
		t.Fatalf("picked %q; want freebsd", s)
	}
	if _, err := m.Pull(ctx, host+"/linux/app:1", PullOptions{Now: t0}); err == nil {
		t.Fatal("a Linux-only image pulled on a node without --linux")
	}
	ml, dsl, _ := newImages(t, PlatformRule{Arch: "amd64", AllowLinux: true})
	rl, err := ml.Pull(ctx, host+"/linux/app:1", PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, filepath.Join(dsl.LayerDir(rl.TopChainID()), "os")); s != "linux" {
		t.Fatalf("picked %q; want linux", s)
	}
	if _, err := m.Resolve(ctx, host+"/missing/app:1", nil); err == nil {
		t.Fatal("resolved a missing image")
	}
}
