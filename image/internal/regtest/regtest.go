// Package regtest starts Debian's docker-registry (the distribution
// registry, 2.8) for tests of image and image/cosign against a real
// registry server. Test support only: nothing outside tests imports it.
package regtest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testaddr"
	"golang.org/x/crypto/bcrypt"
)

// Distribution runs Debian's docker-registry (the distribution
// registry) on a loopback port in a temporary directory and returns its
// host:port. Without the binary the test is skipped, except under CI,
// where .ci/run installs it and its absence is a failure.
func Distribution(t testing.TB) string {
	t.Helper()
	return Start(t, Options{}).Host
}

// Options for Start.
type Options struct {
	// User and Password, when set, guard every repository with htpasswd
	// basic authentication answered through a token-less challenge.
	User, Password string
}

// Server is a running docker-registry.
type Server struct {
	Host string
	// Root is its storage directory: blobs are under
	// docker/registry/v2/blobs/sha256/<2 hex>/<hex>/data.
	Root string
}

// BlobPath is where the registry keeps a blob's bytes.
func (s Server) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(s.Root, "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")
}

// Start runs docker-registry as Distribution does, with options.
func Start(t testing.TB, o Options) Server {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker-registry not installed (Debian package docker-registry): %v", err)
		}
		t.Skip("docker-registry not installed (apt-get install docker-registry)")
	}
	addr := testaddr.Loopback(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", root, addr)
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: legion-test\n    path: %s\n", htpasswd)
	}
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
			if resp.StatusCode == http.StatusOK || o.User != "" && resp.StatusCode == http.StatusUnauthorized {
				return Server{Host: addr, Root: root}
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
