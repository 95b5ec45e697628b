package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// A node resolver left running by a daemon of another build (an upgrade)
// is stopped and replaced by one of this build; one of this build is
// kept, as pods' lookups go on through a daemon's restart.
func TestResolverOfAnotherBuildIsReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zone := filepath.Join(dir, "resolver", "zone.json")
	if err := resolver.WriteZone(zone, resolver.Zone{Records: map[string]resolver.Record{}}); err != nil {
		t.Fatal(err)
	}
	pc, l, err := resolver.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	l.Close()
	// Whatever runs at the end goes with the zone file.
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(zone)) })
	old := exec.Command(os.Args[0], "node-resolver", "--listen", addr, "--zone", zone, "--upstream", "127.0.0.1:1", "--build", "0.0.9 older")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- old.Wait() }()
	t.Cleanup(func() { old.Process.Kill() })
	waitFor(t, "the older resolver to answer", func() bool { return resolver.BuildAt(addr) == "0.0.9 older" })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	if got, err := daemon.StartResolverProcess(ctx, os.Args[0], addr, zone, dir, log); err != nil || got != addr {
		t.Fatalf("starting the resolver over an older one: %q, %v", got, err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the older resolver still runs")
	}
	if got := resolver.BuildAt(addr); got != daemon.BuildID() {
		t.Fatalf("the resolver answering is of build %q, want this one's %q", got, daemon.BuildID())
	}
	pid, err := os.ReadFile(resolver.PidFile(zone))
	if err != nil {
		t.Fatal(err)
	}
	// Started again by a daemon of the same build, it is kept.
	if got, err := daemon.StartResolverProcess(ctx, os.Args[0], addr, zone, dir, log); err != nil || got != addr {
		t.Fatalf("starting the resolver over one of this build: %q, %v", got, err)
	}
	if again, err := os.ReadFile(resolver.PidFile(zone)); err != nil || string(again) != string(pid) {
		t.Errorf("the resolver of this build was replaced: pid %q, then %q (%v)", pid, again, err)
	}
}
