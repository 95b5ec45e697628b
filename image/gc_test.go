package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGCHonoursAgeClonesAndPins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("old:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "old", body: "o"})))
	pushImage(t, reg.ref("cloned:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "cloned", body: "c"})))
	pushImage(t, reg.ref("pinned:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "pinned", body: "p"})))
	pushImage(t, reg.ref("fresh:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "fresh", body: "f"})))
	m, ds, _ := newImages(t, freebsdAmd64)
	recs := map[string]*Record{}
	for _, n := range []string{"old", "cloned", "pinned"} {
		r, err := m.Pull(ctx, reg.ref(n+":1"), PullOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		recs[n] = r
	}
	later := t0.Add(50 * time.Minute)
	fresh, err := m.Pull(ctx, reg.ref("fresh:1"), PullOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	root, err := m.PrepareRoot(ctx, "c1", reg.ref("cloned:1"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "cloned")); got != "c" {
		t.Fatalf("root holds %q", got)
	}
	pin, err := m.Pin(recs["pinned"].TopChainID())
	if err != nil {
		t.Fatal(err)
	}

	// 59 minutes on, nothing is old enough.
	res, err := m.GC(ctx, t0.Add(59*time.Minute), 0)
	if err != nil || len(res.Images)+len(res.Layers) != 0 {
		t.Fatalf("GC at 59m = %+v, %v; want nothing removed", res, err)
	}
	// After an hour the three old images go; the cloned and pinned
	// layers stay, the fresh image stays whole.
	res, err = m.GC(ctx, t0.Add(61*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantImages := []string{reg.ref("cloned:1"), reg.ref("old:1"), reg.ref("pinned:1")}
	if d := cmp.Diff(wantImages, res.Images); d != "" {
		t.Fatalf("removed images (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{recs["old"].TopChainID()}, res.Layers); d != "" {
		t.Fatalf("removed layers (-want +got):\n%s", d)
	}
	have := map[string]bool{}
	for _, l := range storedLayers(t, ds) {
		have[l] = true
	}
	for _, c := range []string{recs["cloned"].TopChainID(), recs["pinned"].TopChainID(), fresh.TopChainID()} {
		if !have[c] {
			t.Fatalf("layer %s removed", c)
		}
	}
	// The container goes and the pin is released: their layers go next.
	if err := m.RemoveRoot(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := pin.Release(); err != nil {
		t.Fatal(err)
	}
	res, err = m.GC(ctx, t0.Add(61*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layers) != 2 {
		t.Fatalf("removed %v; want the cloned and pinned layers", res.Layers)
	}
	// keep names images in use by running containers.
	res, err = m.GC(ctx, later.Add(2*time.Hour), 0, reg.ref("fresh:1"))
	if err != nil || len(res.Images) != 0 {
		t.Fatalf("GC with keep = %+v, %v", res, err)
	}
}

func TestDeadPinDropped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	chain := "sha256:" + strings.Repeat("0", 64)
	// A pin file nobody holds locked: its process died.
	b, _ := json.Marshal(pinFile{Layers: []string{chain}})
	os.WriteFile(filepath.Join(dir, "pin-dead.json"), b, 0o600)
	live, err := pinLayers(dir, []string{"sha256:" + strings.Repeat("1", 64)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	got, err := pinnedLayers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]bool{"sha256:" + strings.Repeat("1", 64): true}, got); d != "" {
		t.Fatalf("pins (-want +got):\n%s", d)
	}
	if exists(filepath.Join(dir, "pin-dead.json")) {
		t.Fatal("dead pin not dropped")
	}
}

func TestIndexLockAndAtomicWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Two indexStore values stand for two processes: each takes the flock on
	// its own open file.
	a, b := &indexStore{dir: dir}, &indexStore{dir: dir}
	var wg sync.WaitGroup
	for i, x := range []*indexStore{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				err := x.update(func(f *indexFile) error {
					ref := strings.Repeat("x", i+1) + "/" + strings.Repeat("y", j+1)
					f.Images[ref] = &Record{Reference: ref}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	f, err := a.read()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Images) != 50 {
		t.Fatalf("index holds %d images; want 50 (a lost update)", len(f.Images))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".index-") {
			t.Fatalf("temporary file %s left", e.Name())
		}
	}
}

func TestConfigLowerCaseKeysAndUnknownKeysKept(t *testing.T) {
	t.Parallel()
	in := `{"architecture":"amd64","os":"freebsd","config":{"cmd":["/bin/sh"],"env":["A=1"],"workingdir":"/w","Healthcheck":{"Test":["CMD","true"]}},"rootfs":{"type":"layers","diff_ids":[]},"history":[{"created_by":"x"}],"org.freebsd.extra":1}`
	c, err := ParseConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.Config.Cmd, []string{"/bin/sh"}) || c.Config.WorkingDir != "/w" || !cmp.Equal(c.Config.Env, []string{"A=1"}) {
		t.Fatalf("lower-case keys not read: %+v", c.Config)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	if _, ok := m["history"]; !ok {
		t.Fatalf("history lost: %s", out)
	}
	if m["org.freebsd.extra"] != 1.0 {
		t.Fatalf("unknown key lost: %s", out)
	}
	cfg := m["config"].(map[string]any)
	if _, ok := cfg["Healthcheck"]; !ok {
		t.Fatalf("config.Healthcheck lost: %s", out)
	}
	if _, ok := cfg["cmd"]; ok {
		t.Fatalf("cmd kept twice: %s", out)
	}
	// Read again, the same.
	c2, err := ParseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	out2, _ := json.Marshal(c2)
	if string(out) != string(out2) {
		t.Fatalf("second round trip changed:\n%s\n%s", out, out2)
	}
}

func TestParseDockerConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Logins
		wantErr string
	}{
		{`{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("bob:pw") + `"}}}`, Logins{"docker.io": {Username: "bob", Password: "pw"}}, ""},
		{`{"auths":{"ghcr.io":{"username":"u","password":"p:with:colons"}}}`, Logins{"ghcr.io": {Username: "u", Password: "p:with:colons"}}, ""},
		{`{"auths":{"ghcr.io":{"auth":"` + b64("u:p:q") + `"}}}`, Logins{"ghcr.io": {Username: "u", Password: "p:q"}}, ""},
		{`{"auths":{"ghcr.io":{"auth":"%%%"}}}`, nil, "not base64"},
		{`{"auths":{"ghcr.io":{"auth":"` + b64("nocolon") + `"}}}`, nil, "user:password"},
		{`{"auths":{"ghcr.io":{}}}`, nil, "want auth, or username and password"},
		{`{"credsStore":"desktop"}`, nil, "no auths"},
	}
	for _, c := range cases {
		got, err := ParseDockerConfig([]byte(c.in))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: got %v; want error with %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.in, d)
		}
	}
	l := Logins{"docker.io": {Username: "x"}}
	if _, ok := l.For("index.docker.io"); !ok {
		t.Fatal("index.docker.io not read as docker.io")
	}
}

func TestCanonicalReferences(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"nginx":                             "docker.io/library/nginx:latest",
		"index.docker.io/library/nginx:1.2": "docker.io/library/nginx:1.2",
		"ghcr.io/a/b":                       "ghcr.io/a/b:latest",
		"localhost/mine:2":                  "localhost/mine:2",
		"127.0.0.1:5000/x@sha256:" + strings.Repeat("a", 64): "127.0.0.1:5000/x@sha256:" + strings.Repeat("a", 64),
	}
	for in, want := range cases {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "UPPER/x", " nginx"} {
		if _, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) accepted", bad)
		}
	}
}

func TestLoginFor(t *testing.T) {
	t.Parallel()
	a := Logins{"ghcr.io": {Username: "a"}}
	b := Logins{"docker.io": {Username: "b"}, "ghcr.io": {Username: "b2"}}
	cases := []struct {
		ref  string
		want string // username, "" for anonymous
	}{
		{"ghcr.io/x/y:1", "a"},
		{"nginx", "b"},
		{"index.docker.io/library/nginx", "b"},
		{"quay.io/x", ""},
	}
	for _, c := range cases {
		l, err := LoginFor(c.ref, a, b)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if l != nil {
			got = l.Username
		}
		if got != c.want {
			t.Errorf("LoginFor(%s) = %q; want %q", c.ref, got, c.want)
		}
	}
}

func TestGCRemovesStaleLeftovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, ds, _ := newImages(t, freebsdAmd64)
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	tmp := filepath.Join(m.dir, "tmp")
	mk := func(p string, dir bool, mtime time.Time) {
		if dir {
			os.MkdirAll(filepath.Join(p, "x"), 0o755)
		} else {
			os.WriteFile(p, []byte("x"), 0o600)
		}
		os.Chtimes(p, mtime, mtime)
	}
	mk(filepath.Join(tmp, "layer-old.blob"), false, old)
	mk(filepath.Join(tmp, "layer-new.blob"), false, now)
	mk(filepath.Join(tmp, "load-old"), true, old)
	mk(filepath.Join(ds.dir, "layers", ".tmp-old"), true, old)
	mk(filepath.Join(ds.dir, "layers", ".tmp-new"), true, now)
	// An overlay root's writable part: kept while its root is recorded.
	mk(filepath.Join(ds.dir, "roots", ".rw", "orphan"), true, old)
	mk(filepath.Join(ds.dir, "roots", ".rw", "kept"), true, old)
	mk(filepath.Join(ds.dir, "roots", "kept.layer"), false, old)
	res, err := m.GC(ctx, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Stale {
		got = append(got, filepath.Base(p))
	}
	sort.Strings(got)
	if d := cmp.Diff([]string{".tmp-old", "layer-old.blob", "load-old", "orphan"}, got); d != "" {
		t.Fatalf("stale removed (-want +got):\n%s", d)
	}
	for _, p := range []string{filepath.Join(tmp, "layer-new.blob"), filepath.Join(ds.dir, "layers", ".tmp-new"),
		filepath.Join(ds.dir, "roots", ".rw", "kept")} {
		if !exists(p) {
			t.Fatalf("%s removed while young", p)
		}
	}
}

// Roots made from an image, and pulls finding it stored, within a minute
// of its last mark do not write the index again (each write takes the
// store's lock and an fsync); a later one marks it anew, so collection
// still sees it used.
func TestPrepareRootMarksUseAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	pushImage(t, reg.ref("busy:1"), imageOf(t, p, layerOf(t, "gzip", ent{name: "busy", body: "b"})))
	m, _, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, reg.ref("busy:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		t.Helper()
		recs, err := m.List()
		if err != nil || len(recs) != 1 {
			t.Fatalf("List = %v, %v", recs, err)
		}
		return recs[0].LastUsed
	}
	for i, at := range []struct {
		after time.Duration
		want  time.Time
	}{
		{10 * time.Second, t0},
		{59 * time.Second, t0},
		{2 * time.Minute, t0.Add(2 * time.Minute)},
		{2*time.Minute + 30*time.Second, t0.Add(2 * time.Minute)},
	} {
		if _, err := m.PrepareRoot(ctx, fmt.Sprintf("c%d", i), reg.ref("busy:1"), "", t0.Add(at.after)); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); !got.Equal(at.want) {
			t.Errorf("after a root at +%s: last used %s, want %s", at.after, got, at.want)
		}
	}
	base := t0.Add(2 * time.Minute)
	for _, at := range []struct {
		after time.Duration
		want  time.Time
	}{
		{30 * time.Second, base},
		{time.Minute, base.Add(time.Minute)},
	} {
		for _, policy := range []PullPolicy{Never, IfNotPresent} {
			rec, err := m.Pull(ctx, reg.ref("busy:1"), PullOptions{Policy: policy, Now: base.Add(at.after)})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.LastUsed.Equal(at.want) {
				t.Errorf("pull (%v) at +%s returned last used %s, want %s", policy, at.after, rec.LastUsed, at.want)
			}
			if got := lastUsed(); !got.Equal(at.want) {
				t.Errorf("after a pull (%v) at +%s: last used %s, want %s", policy, at.after, got, at.want)
			}
		}
	}
}

// The index read once is kept while the file is the same one: a reader
// is handed copies (changing one changes nothing stored), and a change
// written by another process (another indexStore on the same directory)
// is seen at the next read.
func TestIndexKeptUntilTheFileIsReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := &indexStore{dir: dir}, &indexStore{dir: dir}
	t.Cleanup(a.close)
	key := func(ref string) string {
		r, err := ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		return r.String()
	}
	put := func(x *indexStore, ref string) {
		t.Helper()
		if err := x.update(func(f *indexFile) error {
			f.Images[key(ref)] = &Record{Reference: key(ref), Layers: []LayerRecord{{ChainID: "c"}}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(b, "one")
	first, err := a.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.snapshot(); err != nil || again != first {
		t.Fatalf("second read of an unchanged index: %p, %v; want the kept %p", again, err, first)
	}
	m := &Images{index: a}
	rec, err := m.Get("one")
	if err != nil {
		t.Fatal(err)
	}
	rec.Layers[0].ChainID = "changed"
	if first.Images[key("one")].Layers[0].ChainID != "c" {
		t.Fatal("changing a record Get returned changed the kept index")
	}
	for i := 0; i < 20; i++ {
		ref := fmt.Sprintf("r%d", i)
		put(b, ref)
		f, err := a.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if f.Images[key(ref)] == nil {
			t.Fatalf("after another process wrote %s, the index read lacks it", ref)
		}
	}
}
