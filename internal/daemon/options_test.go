package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A daemon asked for no resolver gets none: the defaults leave the
// resolver's address empty rather than taking a fixed port that another
// daemon or test on the host may hold. Set, it is kept.
func TestDefaultsAskForNoResolver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run")}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.DNSListen != "" {
		t.Fatalf("DNSListen defaults to %q, want none", o.DNSListen)
	}
	o.DNSListen = "127.0.0.1:0"
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.DNSListen != "127.0.0.1:0" {
		t.Fatalf("DNSListen set to 127.0.0.1:0 became %q", o.DNSListen)
	}
}

// legion up's run directory goes with it however it ends: here the node
// never registers, as its pod network is refused after the directory is
// made (a cluster electing no leader, stopped by the user, ends so too).
func TestUpRemovesItsRunDirectoryOnEveryWayOut(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	o := Options{DataDir: filepath.Join(dir, "data"), RunDir: run, Listen: "127.0.0.1:0", DNSListen: "none",
		Upstreams: []string{}, RemovePods: true, Platform: PlatformProcess, PodNetwork: "bogus"}
	err := Run(context.Background(), o, func(*Node) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `pod network "bogus"`) {
		t.Fatalf("Run with a bogus pod network: %v", err)
	}
	if _, err := os.Stat(run); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run directory is left behind: %v", err)
	}
}
