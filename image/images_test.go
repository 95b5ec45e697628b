package image

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestConcurrentPullsShareLayers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	base := layerOf(t, "gzip", ent{name: "base", body: strings.Repeat("b", 1<<16)})
	pushImage(t, reg.ref("a:1"), imageOf(t, p, base, layerOf(t, "gzip", ent{name: "a", body: "a"})))
	pushImage(t, reg.ref("b:1"), imageOf(t, p, base, layerOf(t, "gzip", ent{name: "b", body: "b"})))
	m, ds, _ := newImages(t, freebsdAmd64)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, r := range []string{"a:1", "b:1", "a:1", "b:1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Pull(ctx, reg.ref(r), PullOptions{Now: t0})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(storedLayers(t, ds)); n != 3 {
		t.Fatalf("%d layers stored; want 3", n)
	}
	bd, _ := base.Digest()
	if n := reg.blobGets(bd); n != 1 {
		t.Fatalf("base fetched %d times; want once", n)
	}
	if list, _ := m.List(); len(list) != 2 {
		t.Fatalf("index holds %d images; want 2", len(list))
	}
}

func TestLinuxImageInStoreRefusedWithoutLinux(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	pushImage(t, reg.ref("l:1"), imageOf(t, Platform{OS: "linux", Arch: "amd64"}, layerOf(t, "gzip", ent{name: "l", body: "l"})))
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "s"))
	withLinux, err := Open(Options{DataDir: dir, Store: ds, Platform: PlatformRule{Arch: "amd64", AllowLinux: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withLinux.Pull(ctx, reg.ref("l:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	// The node restarts without --linux: the stored image is refused too.
	without, err := Open(Options{DataDir: dir, Store: ds, Platform: PlatformRule{Arch: "amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	var pe *ErrPlatform
	for _, pol := range []PullPolicy{IfNotPresent, Never} {
		if _, err := without.Pull(ctx, reg.ref("l:1"), PullOptions{Policy: pol, Now: t0}); !errors.As(err, &pe) {
			t.Fatalf("policy %s: got %v; want a platform refusal", pol, err)
		}
	}
}

func TestCollectRunsAtTicks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	reg := startRegistry(t, nil)
	pushImage(t, reg.ref("c:1"), imageOf(t, Platform{OS: "freebsd", Arch: "amd64"}, layerOf(t, "gzip", ent{name: "c", body: "c"})))
	m, ds, _ := newImages(t, freebsdAmd64)
	if _, err := m.Pull(ctx, reg.ref("c:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	tick := make(chan time.Time)
	var mu sync.Mutex
	now := t0.Add(10 * time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Collect(ctx, tick, func() time.Time { mu.Lock(); defer mu.Unlock(); return now }, func() []string { return nil })
	}()
	tick <- time.Time{} // 10 minutes on: stays
	tick <- time.Time{} // the send returns once the previous collection finished
	if list, _ := m.List(); len(list) != 1 {
		t.Fatalf("collected after 10 minutes: %d images left", len(list))
	}
	mu.Lock()
	now = t0.Add(70 * time.Minute)
	mu.Unlock()
	tick <- time.Time{}
	tick <- time.Time{}
	cancel()
	<-done
	if list, _ := m.List(); len(list) != 0 {
		t.Fatalf("not collected after 70 minutes: %d images left", len(list))
	}
	if n := len(storedLayers(t, ds)); n != 0 {
		t.Fatalf("%d layers left", n)
	}
}

func TestLogProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	p := Platform{OS: "freebsd", Arch: "amd64"}
	base := layerOf(t, "gzip", ent{name: "x", body: "x"})
	pushImage(t, reg.ref("p:1"), imageOf(t, p, base))
	pushImage(t, reg.ref("p:2"), imageOf(t, p, base, layerOf(t, "none", ent{name: "y", body: "y"})))
	var buf bytes.Buffer
	lp := &LogProgress{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))}
	dir := t.TempDir()
	ds := newDirStore(t, filepath.Join(dir, "s"))
	m, err := Open(Options{DataDir: dir, Store: ds, Platform: freebsdAmd64, Progress: lp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pull(ctx, reg.ref("p:1"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pull(ctx, reg.ref("p:2"), PullOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`msg="pulling layer"`, `msg="layer ready"`, `msg="layer already present"`, "image=" + reg.ref("p:2")} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, `msg="layer ready"`); got != 2 {
		t.Errorf("%d layers reported ready; want 2:\n%s", got, out)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestFailureMidPullLeavesNoRecordOrTempFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := Platform{OS: "freebsd", Arch: "amd64"}
	l0 := layerOf(t, "gzip", ent{name: "a", body: strings.Repeat("a", 1<<15)})
	l1 := layerOf(t, "none", ent{name: "b", body: strings.Repeat("b", 1<<15)})
	l2 := layerOf(t, "gzip", ent{name: "c", body: strings.Repeat("c", 1<<15)})
	bad, _ := l1.Digest()
	reg := startRegistry(t, tamperBlob(bad.String()))
	pushImage(t, reg.ref("mid:1"), imageOf(t, p, l0, l1, l2))
	m, ds, _ := newImages(t, freebsdAmd64)
	_, err := m.Pull(ctx, reg.ref("mid:1"), PullOptions{Now: t0})
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "layer 1") {
		t.Fatalf("got %v; want layer 1's digest refused", err)
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Fatalf("index holds %d images", len(list))
	}
	if n := len(storedLayers(t, ds)); n > 1 {
		t.Fatalf("%d layers stored; at most the verified first one may stay", n)
	}
	ents, _ := os.ReadDir(filepath.Join(m.dir, "tmp"))
	if n := countFiles(ents, ".blob") + countFiles(ents, ".tar"); n != 0 {
		t.Fatalf("%d temporary layer files left", n)
	}
	pins, _ := os.ReadDir(filepath.Join(m.dir, "pins"))
	if len(pins) != 0 {
		t.Fatalf("pins left: %v", pins)
	}
}

func TestIndexPlatformMustMatchConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := startRegistry(t, nil)
	linuxImg := imageOf(t, Platform{OS: "linux", Arch: "amd64"}, layerOf(t, "gzip", ent{name: "x", body: "x"}))
	// An index that calls a Linux image FreeBSD.
	pushIndex(t, reg.ref("liar:1"), indexOf(t, map[Platform]v1.Image{{OS: "freebsd", Arch: "amd64"}: linuxImg}))
	m, ds, _ := newImages(t, freebsdAmd64)
	_, err := m.Pull(ctx, reg.ref("liar:1"), PullOptions{Now: t0})
	if err == nil || !strings.Contains(err.Error(), "the index says freebsd/amd64, its config linux/amd64") {
		t.Fatalf("got %v; want the mismatch named", err)
	}
	if n := len(storedLayers(t, ds)); n != 0 {
		t.Fatalf("%d layers stored", n)
	}
}
