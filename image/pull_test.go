package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"net/http"
	"net/http/httptest"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestPullExtractsLayersAndRecordsImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	base := layerOf(t, "gzip",
		ent{name: "bin/", typ: tar.TypeDir},
		ent{name: "bin/su", body: "su", mode: 0o4755, uid: 0, gid: 0},
		ent{name: "home/app/", typ: tar.TypeDir, mode: 0o750, uid: 1001, gid: 1002},
		ent{name: "home/app/data", body: "d", mode: 0o600, uid: 1001, gid: 1002},
		ent{name: "etc/motd", body: "hello"},
		ent{name: "etc/localtime", typ: tar.TypeSymlink, link: "/usr/share/zoneinfo/UTC"},
		ent{name: "etc/motd2", typ: tar.TypeLink, link: "etc/motd"},
	)
	top := layerOf(t, "zstd", ent{name: "etc/motd", body: "replaced"})
	img := imageOf(t, Platform{OS: "freebsd", Arch: "amd64"}, base, top)
	pushImage(t, reg.ref("app:1"), img)

	m, ds, _ := newImages(t, freebsdAmd64)
	rec, err := m.Pull(ctx, reg.ref("app:1"), PullOptions{Namespace: "shop", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := img.Digest()
	cfg, _ := img.ConfigFile()
	chains, _ := ChainIDs([]string{cfg.RootFS.DiffIDs[0].String(), cfg.RootFS.DiffIDs[1].String()})
	if rec.Reference != reg.ref("app:1") || rec.Digest != wantDigest.String() || rec.Manifest != wantDigest.String() {
		t.Fatalf("record = %s %s %s; want %s and digest %s", rec.Reference, rec.Digest, rec.Manifest, reg.ref("app:1"), wantDigest)
	}
	if d := cmp.Diff([]string{chains[0], chains[1]}, []string{rec.Layers[0].ChainID, rec.Layers[1].ChainID}); d != "" {
		t.Fatalf("chain ids (-want +got):\n%s", d)
	}
	if rec.Platform != (Platform{OS: "freebsd", Arch: "amd64"}) || rec.Private {
		t.Fatalf("record platform %v private %v; want freebsd/amd64, public", rec.Platform, rec.Private)
	}
	lower, upper := ds.LayerDir(chains[0]), ds.LayerDir(chains[1])
	if got := readFile(t, filepath.Join(lower, "etc/motd")); got != "hello" {
		t.Fatalf("lower etc/motd = %q", got)
	}
	if got := readFile(t, filepath.Join(upper, "etc/motd")); got != "replaced" {
		t.Fatalf("upper etc/motd = %q", got)
	}
	fi, err := os.Stat(filepath.Join(upper, "bin/su"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/su mode %v; want setuid 0755", fi.Mode())
	}
	if l, err := os.Readlink(filepath.Join(upper, "etc/localtime")); err != nil || l != "/usr/share/zoneinfo/UTC" {
		t.Fatalf("etc/localtime link = %q, %v", l, err)
	}
	if got := readFile(t, filepath.Join(lower, "etc/motd2")); got != "hello" {
		t.Fatalf("hard link etc/motd2 = %q", got)
	}
	if os.Geteuid() == 0 {
		st := statOwner(t, filepath.Join(upper, "home/app/data"))
		if st != [2]int{1001, 1002} {
			t.Fatalf("home/app/data owner %v; want 1001:1002", st)
		}
	}
	di, _ := os.Stat(filepath.Join(upper, "home/app"))
	if di.Mode().Perm() != 0o750 {
		t.Fatalf("home/app mode %v; want 0750", di.Mode())
	}
	// Nothing is left in the temporary directory.
	if ents, _ := os.ReadDir(filepath.Join(m.dir, "tmp")); countFiles(ents, ".blob")+countFiles(ents, ".tar") != 0 {
		t.Fatalf("temporary layer files left: %v", ents)
	}
	// A second pull asks nothing more of the registry.
	before := reg.count("GET /v2/app/manifests/1")
	if _, err := m.Pull(ctx, reg.ref("app:1"), PullOptions{Namespace: "other", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if after := reg.count("GET /v2/app/manifests/1"); after != before {
		t.Fatalf("second pull fetched the manifest again (%d -> %d)", before, after)
	}
}

func countFiles(ents []os.DirEntry, suffix string) int {
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}

func TestPlatformChoice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	img := func(p Platform) v1.Image { return imageOf(t, p, layerOf(t, "gzip", ent{name: "os", body: p.String()})) }
	fbsd := Platform{OS: "freebsd", Arch: "amd64"}
	lin := Platform{OS: "linux", Arch: "amd64"}
	lin64 := Platform{OS: "linux", Arch: "arm64"}
	win := Platform{OS: "windows", Arch: "amd64"}
	pushIndex(t, reg.ref("both:1"), indexOf(t, map[Platform]v1.Image{fbsd: img(fbsd), lin: img(lin)}))
	pushIndex(t, reg.ref("linux:1"), indexOf(t, map[Platform]v1.Image{lin: img(lin), lin64: img(lin64)}))
	pushIndex(t, reg.ref("other:1"), indexOf(t, map[Platform]v1.Image{win: img(win), lin64: img(lin64)}))
	pushImage(t, reg.ref("single-linux:1"), img(lin))

	cases := []struct {
		ref       string
		linux     bool
		want      string // content of /os, or "" for a refusal
		errSubstr []string
	}{
		{"both:1", false, "freebsd/amd64", nil},
		{"both:1", true, "freebsd/amd64", nil},
		{"linux:1", true, "linux/amd64", nil},
		{"linux:1", false, "", []string{"offers linux/amd64, linux/arm64", "this node runs freebsd/amd64", "--linux"}},
		{"other:1", true, "", []string{"offers linux/arm64, windows/amd64", "freebsd/amd64 or linux/amd64"}},
		{"single-linux:1", false, "", []string{"offers linux/amd64"}},
		{"single-linux:1", true, "linux/amd64", nil},
	}
	for _, c := range cases {
		t.Run(c.ref+map[bool]string{true: "+linux", false: ""}[c.linux], func(t *testing.T) {
			m, ds, _ := newImages(t, PlatformRule{Arch: "amd64", AllowLinux: c.linux})
			rec, err := m.Pull(ctx, reg.ref(c.ref), PullOptions{Now: t0})
			if c.want == "" {
				var pe *ErrPlatform
				if !errors.As(err, &pe) {
					t.Fatalf("got %v, want a platform refusal", err)
				}
				for _, s := range c.errSubstr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if n := len(storedLayers(t, ds)); n != 0 {
					t.Fatalf("%d layers stored for a refused image", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(ds.LayerDir(rec.TopChainID()), "os")); got != c.want {
				t.Fatalf("picked %q, want %q", got, c.want)
			}
		})
	}
}

func TestResolveNamesIndexDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	fbsd := Platform{OS: "freebsd", Arch: "amd64"}
	single := imageOf(t, fbsd, layerOf(t, "gzip", ent{name: "a", body: "a"}))
	idx := indexOf(t, map[Platform]v1.Image{fbsd: single})
	pushIndex(t, reg.ref("multi:1"), idx)
	pushImage(t, reg.ref("single:1"), single)
	m, _, _ := newImages(t, freebsdAmd64)

	idxDigest, _ := idx.Digest()
	imgDigest, _ := single.Digest()
	cfgDigest, _ := single.ConfigName()
	got, err := m.Resolve(ctx, reg.ref("multi:1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != idxDigest.String() || got == cfgDigest.String() {
		t.Fatalf("Resolve(multi) = %s; want the index digest %s", got, idxDigest)
	}
	if got, err := m.Resolve(ctx, reg.ref("single:1"), nil); err != nil || got != imgDigest.String() {
		t.Fatalf("Resolve(single) = %s, %v; want %s", got, err, imgDigest)
	}
	before := reg.total()
	if got, err := m.Resolve(ctx, reg.ref("multi@"+idxDigest.String()), nil); err != nil || got != idxDigest.String() {
		t.Fatalf("Resolve(by digest) = %s, %v", got, err)
	}
	if reg.total() != before {
		t.Fatal("Resolve by digest asked the registry")
	}
	if _, err := m.Resolve(ctx, reg.ref("missing:1"), nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve(missing) = %v; want ErrNotFound", err)
	}
	// A pull by the resolved digest records the index digest and the
	// platform manifest.
	rec, err := m.Pull(ctx, reg.ref("multi@"+idxDigest.String()), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != idxDigest.String() || rec.Manifest != imgDigest.String() {
		t.Fatalf("record digest %s manifest %s; want %s and %s", rec.Digest, rec.Manifest, idxDigest, imgDigest)
	}
}

func TestTamperedBlobRefusedNothingStored(t *testing.T) {
	t.Parallel()
	for _, comp := range []string{"gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) { testTamperedBlob(t, comp) })
	}
}

func testTamperedBlob(t *testing.T, comp string) {
	ctx := context.Background()
	layer := layerOf(t, comp, ent{name: "a", body: strings.Repeat("x", 4096)})
	ld, _ := layer.Digest()
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				b := rec.Body.Bytes()
				if len(b) > 20 {
					b[len(b)-10] ^= 0xff // same length, other bytes
				}
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(b)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	pushImage(t, reg.ref("bad:1"), imageOf(t, Platform{OS: "freebsd", Arch: "amd64"}, layer))
	m, ds, _ := newImages(t, freebsdAmd64)
	cs := &countingStore{Store: ds}
	m.o.Store = cs
	_, err := m.Pull(ctx, reg.ref("bad:1"), PullOptions{Now: t0})
	if !errors.Is(err, ErrDigest) {
		t.Fatalf("got %v; want a digest mismatch", err)
	}
	if reg.blobGets(ld) == 0 {
		t.Fatal("the layer was never fetched")
	}
	if len(cs.begun) != 0 || len(storedLayers(t, ds)) != 0 {
		t.Fatalf("layers begun %v, stored %v; want none", cs.begun, storedLayers(t, ds))
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Fatalf("index holds %d images after a refused pull", len(list))
	}
}

func TestDiffIDMismatchRefusedBeforeExtraction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	img := imageOf(t, Platform{OS: "freebsd", Arch: "amd64"}, layerOf(t, "gzip", ent{name: "a", body: "a"}))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	other := layerOf(t, "gzip", ent{name: "b", body: "b"})
	cf.RootFS.DiffIDs[0], _ = other.DiffID() // claims another layer's id
	bad, err := mutateConfig(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	pushImage(t, reg.ref("liar:1"), bad)
	m, ds, _ := newImages(t, freebsdAmd64)
	cs := &countingStore{Store: ds}
	m.o.Store = cs
	_, err = m.Pull(ctx, reg.ref("liar:1"), PullOptions{Now: t0})
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "diff_id") {
		t.Fatalf("got %v; want a diff_id mismatch", err)
	}
	if len(cs.begun) != 0 {
		t.Fatalf("extraction began (%v) before the diff_id check", cs.begun)
	}
}

func TestSharedBaseLayerStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	base := layerOf(t, "gzip", ent{name: "base", body: strings.Repeat("b", 1000)})
	a := imageOf(t, p, base, layerOf(t, "gzip", ent{name: "a", body: "a"}))
	b := imageOf(t, p, base, layerOf(t, "gzip", ent{name: "b", body: "b"}))
	pushImage(t, reg.ref("a:1"), a)
	pushImage(t, reg.ref("b:1"), b)
	m, ds, _ := newImages(t, freebsdAmd64)
	ra, err := m.Pull(ctx, reg.ref("a:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := m.Pull(ctx, reg.ref("b:1"), PullOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	bd, _ := base.Digest()
	if n := reg.blobGets(bd); n != 1 {
		t.Fatalf("base layer fetched %d times; want once", n)
	}
	if ra.Layers[0].ChainID != rb.Layers[0].ChainID {
		t.Fatal("the base layers' chain ids differ")
	}
	if got := len(storedLayers(t, ds)); got != 3 {
		t.Fatalf("%d layers stored; want 3 (one shared base)", got)
	}
}

func TestLoginProtectedRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tok := &tokenServer{user: "alice", pass: "s3cret", token: "tok-123"}
	reg := startRegistry(t, tok.wrap)
	tok.realm = "http://" + reg.host + "/token"
	p := Platform{OS: "freebsd", Arch: "amd64"}
	img := imageOf(t, p, layerOf(t, "gzip", ent{name: "secret", body: "s"}))
	pushImage(t, reg.ref("private/app:1"), img, remote.WithAuth(&basicAuth{"alice", "s3cret"}))

	m, _, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, reg.ref("private/app:1"), PullOptions{Namespace: "shop", Now: t0}); !errors.Is(err, ErrDenied) {
		t.Fatalf("anonymous pull: %v; want ErrDenied", err)
	}
	cfgJSON := `{"auths":{"http://` + reg.host + `/v1/":{"auth":"` + b64("alice:s3cret") + `"}}}`
	logins, err := ParseDockerConfig([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	login, ok := logins.For(reg.host)
	if !ok {
		t.Fatalf("no login for %s in %v", reg.host, logins)
	}
	rec, err := m.Pull(ctx, reg.ref("private/app:1"), PullOptions{Namespace: "shop", Login: &login, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Private || !cmp.Equal(rec.Namespaces, []string{"shop"}) {
		t.Fatalf("record private=%v namespaces=%v; want private to shop", rec.Private, rec.Namespaces)
	}
	if tok.issued == 0 {
		t.Fatal("no bearer token was asked for")
	}
	// Another namespace without a login: the registry decides, and says no.
	if _, err := m.Pull(ctx, reg.ref("private/app:1"), PullOptions{Namespace: "blog", Now: t0}); !errors.Is(err, ErrDenied) {
		t.Fatalf("other namespace, anonymous: %v; want ErrDenied", err)
	}
	if _, err := m.PrepareRoot(ctx, "c1", reg.ref("private/app:1"), "blog", t0); !errors.Is(err, ErrNotPresent) {
		t.Fatalf("root for another namespace: %v; want ErrNotPresent", err)
	}
	// With its own login it fetches the manifest and config only.
	ld := rec.Layers[0].Digest
	layerGets := reg.count("GET /v2/private/app/blobs/" + ld)
	rec2, err := m.Pull(ctx, reg.ref("private/app:1"), PullOptions{Namespace: "blog", Login: &login, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(rec2.Namespaces, []string{"blog", "shop"}) {
		t.Fatalf("namespaces %v; want blog and shop", rec2.Namespaces)
	}
	if got := reg.count("GET /v2/private/app/blobs/" + ld); got != layerGets {
		t.Fatalf("layer fetched again (%d -> %d)", layerGets, got)
	}
	if reg.count("GET /v2/private/app/blobs/"+rec.ConfigDigest) < 2 {
		t.Fatal("the config was not fetched again for the second namespace")
	}
}

func mutateConfig(img v1.Image, cf *v1.ConfigFile) (v1.Image, error) {
	return mutateConfigFile(img, cf)
}
