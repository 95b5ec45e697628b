package image

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A registry that takes the connection and never answers fails a pull
// once the response timeout passes, instead of keeping it pulling for
// good.
func TestPullFromASilentRegistryEnds(t *testing.T) {
	t.Parallel()
	quit := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never a byte back
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(quit) }) // first: Close waits for the handlers
	dir := t.TempDir()
	m, err := Open(Options{DataDir: filepath.Join(dir, "data"), Store: newDirStore(t, filepath.Join(dir, "store")),
		Platform: freebsdAmd64, Registry: &Registry{ResponseTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(silent.URL, "http://") + "/shop/web:1"
	done := make(chan error, 1)
	go func() {
		_, err := m.Pull(context.Background(), ref, PullOptions{Namespace: "default", Now: time.Now()})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") {
			t.Fatalf("pull from a silent registry: %v, want the response timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a pull from a registry that never answers is still pulling after 20 s")
	}
}

// A registry that sends part of a layer and then nothing fails the pull
// once the progress deadline passes, naming it, instead of holding the
// layer's lock (which every pull of an image sharing the layer waits for)
// for good.
func TestPullOfALayerThatStopsComingEnds(t *testing.T) {
	t.Parallel()
	body := make([]byte, 256<<10)
	for i := range body {
		body[i] = byte(i*7 + i/251) // not much for gzip to squeeze
	}
	layer := layerOf(t, "gzip", ent{name: "big", body: string(body)})
	d, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+d.String()) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes()[:4096]) // the start, then nothing
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		})
	})
	t.Cleanup(func() { close(quit) }) // before the registry's Close, which waits for the handlers
	pushImage(t, reg.ref("stalls:1"), imageOf(t, Platform{OS: "freebsd", Arch: "amd64"}, layer))
	dir := t.TempDir()
	m, err := Open(Options{DataDir: filepath.Join(dir, "data"), Store: newDirStore(t, filepath.Join(dir, "store")),
		Platform: freebsdAmd64, ProgressDeadline: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Pull(context.Background(), reg.ref("stalls:1"), PullOptions{Now: time.Now()})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "no data for 200ms") {
			t.Fatalf("pull of a layer that stops coming: %v, want %v after 200ms", err, ErrStalled)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a pull of a layer that stopped coming is still pulling after 20 s")
	}
}
