package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
)

// A command against an address where no manager runs says so after the
// client's DialRetry (2 s), naming the address and what to do, rather than
// wait out the election retry and print gRPC's transport error.
func TestCommandAgainstADownManagerFailsFast(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{})
	down := testaddr.Loopback(t)
	start := time.Now()
	out, err := runLegion(t, "", "get", "services", "--server", down, "--credentials", c.AdminFile())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no manager answers at "+down) || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("legion get against %s: %v\n%s", down, err, out)
	}
	if took >= client.DefaultRetry/2 {
		t.Fatalf("it took %s to say no manager answers: the election retry was waited out", took)
	}
}

// When the address no manager answers at is a context's, the error names
// the context and its file: the user gave no address, and a context that
// legion up added lasts only while legion up runs.
func TestADownContextIsNamed(t *testing.T) {
	for _, k := range []string{envServer, envCredentials, envContext} {
		t.Setenv(k, "")
	}
	c := testcluster.New(t, testcluster.Options{})
	down := testaddr.Loopback(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if out, err := runLegion(t, "", "context", "set", "gone", "--server", down, "--credentials", c.AdminFile(), "--config", cfg); err != nil {
		t.Fatalf("context set: %v\n%s", err, out)
	}
	_, err := runLegion(t, "", "get", "services", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "no manager answers at "+down) ||
		!strings.Contains(err.Error(), "the address is context gone's ("+cfg+"): if legion up made it, it answers only while legion up runs") {
		t.Fatalf("legion get through a context whose cluster is down: %v", err)
	}
	_, err = runLegion(t, "", "get", "services", "--config", cfg, "--server", down)
	if err == nil || strings.Contains(err.Error(), "context gone") {
		t.Fatalf("with --server given: %v, want no word of the context", err)
	}
}
