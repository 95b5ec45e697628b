package image

import (
	"context"
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
