package image

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// startDockerRegistry runs Debian's docker-registry (the distribution
// registry) on a loopback port in a temporary directory and returns its
// host:port. Without the binary the test is skipped, except under CI,
// where .ci/run installs it and its absence is a failure.
func startDockerRegistry(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker-registry not installed (Debian package docker-registry): %v", err)
		}
		t.Skip("docker-registry not installed (apt-get install docker-registry)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		logf.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			t.Fatalf("docker-registry exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry not answering on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness, bounded by the deadline
	}
}

func TestDistributionRegistry(t *testing.T) {
	ctx := context.Background()
	host := startDockerRegistry(t)
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
