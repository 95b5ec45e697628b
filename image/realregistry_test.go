package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/legionbsd/legion/image/internal/regtest"
)

func TestDistributionRegistry(t *testing.T) {
	t.Parallel()
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

func TestDistributionLoginTamperAndDiffID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := regtest.Start(t, regtest.Options{User: "bob", Password: "pw"})
	auth := remote.WithAuth(&basicAuth{"bob", "pw"})
	p := Platform{OS: "freebsd", Arch: "amd64"}
	good := imageOf(t, p, layerOf(t, "gzip", ent{name: "a", body: strings.Repeat("a", 8192)}))
	pushImage(t, srv.Host+"/team/good:1", good, auth)

	m, ds, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, srv.Host+"/team/good:1", PullOptions{Namespace: "x", Now: t0}); !errors.Is(err, ErrDenied) {
		t.Fatalf("anonymous: %v; want ErrDenied", err)
	}
	logins, err := ParseDockerConfig([]byte(`{"auths":{"` + srv.Host + `":{"username":"bob","password":"pw"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	login, _ := logins.For(srv.Host)
	rec, err := m.Pull(ctx, srv.Host+"/team/good:1", PullOptions{Namespace: "x", Login: &login, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Private {
		t.Fatal("an image pulled with a login is not private")
	}

	// A blob changed on the registry's disk is refused.
	bad := imageOf(t, p, layerOf(t, "gzip", ent{name: "b", body: strings.Repeat("b", 8192)}))
	pushImage(t, srv.Host+"/team/bad:1", bad, auth)
	layers, _ := bad.Layers()
	ld, _ := layers[0].Digest()
	blob, err := os.ReadFile(srv.BlobPath(ld.String()))
	if err != nil {
		t.Fatal(err)
	}
	blob[len(blob)-12] ^= 0x55
	if err := os.WriteFile(srv.BlobPath(ld.String()), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	before := len(storedLayers(t, ds))
	if _, err := m.Pull(ctx, srv.Host+"/team/bad:1", PullOptions{Namespace: "x", Login: &login, Now: t0}); !errors.Is(err, ErrDigest) {
		t.Fatalf("tampered blob: %v; want ErrDigest", err)
	}
	if after := len(storedLayers(t, ds)); after != before {
		t.Fatalf("layers %d -> %d after a refused blob", before, after)
	}

	// A config naming another diff_id is refused before extraction.
	cf, _ := good.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0], _ = layers[0].DiffID()
	liar, err := mutateConfig(imageOf(t, p, layerOf(t, "gzip", ent{name: "c", body: "c"})), cf)
	if err != nil {
		t.Fatal(err)
	}
	pushImage(t, srv.Host+"/team/liar:1", liar, auth)
	cs := &countingStore{Store: ds}
	m.o.Store = cs
	if _, err := m.Pull(ctx, srv.Host+"/team/liar:1", PullOptions{Namespace: "x", Login: &login, Now: t0}); !errors.Is(err, ErrDigest) {
		t.Fatalf("diff_id: %v; want ErrDigest", err)
	}
	if len(cs.begun) != 0 {
		t.Fatalf("extraction began: %v", cs.begun)
	}
}
