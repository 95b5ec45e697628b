package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"))
}

// The example runs against a real manager on loopback.
func TestExampleAgainstAManager(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Config{DataDir: dir, Listen: "127.0.0.1:0", WriteTimeout: 5 * time.Second,
		Timing: store.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
			SnapshotThreshold: 1 << 20, SnapshotInterval: time.Hour, TrailingLogs: 100}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	defer func() {
		s.Stop()
		<-done
	}()
	ctx := context.Background()
	bare, err := client.New(client.Options{Server: s.Addr(), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.Init(ctx); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, s.Addr(), filepath.Join(dir, server.AdminFile), &out); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^config/greeting created at version \d+
value: hello from the Go client
1 config\(s\) labelled example=client at version \d+
config/greeting deleted
$`)
	if !want.MatchString(out.String()) {
		t.Fatalf("output:\n%s", out.String())
	}
}
