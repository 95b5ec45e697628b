package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/logtest"
)

// On a real file system that fills up (a small tmpfs; needs root to
// mount it, skipped otherwise): the only manager keeps leading and
// refuses writes with ENOSPC, the flusher's bbolt commits fail without
// harm, and once the filler is removed writes resume and everything
// acknowledged survives a restart.
func TestFullTmpfsKeepsTheOnlyManagerLeading(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	mounted := false
	t.Cleanup(func() {
		if mounted {
			if err := syscall.Unmount(mnt, 0); err != nil {
				t.Errorf("unmounting %s: %v", mnt, err)
			}
		}
	})
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	mounted = true
	dir := filepath.Join(mnt, "data")
	var n *node
	t.Cleanup(func() {
		if n != nil {
			n.s.Close()
		}
	})
	var logged logtest.Buffer
	_, tr := raft.NewInmemTransport("m1")
	s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming(), WriteTimeout: 3 * time.Second, Logger: logged.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	n = &node{id: "m1", dir: dir, tr: tr, s: s}
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	states := leaderWatch(t, n.s.raft)
	term := n.s.raft.CurrentTerm()

	// Fill what is free with a file of its own.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	acked := map[string]string{}
	refused := fillUntilRefused(t, n.s, acked)
	if !errors.Is(refused, ErrLogFull) || !errors.Is(refused, syscall.ENOSPC) {
		t.Fatalf("write on a full tmpfs: %v, want ErrLogFull with ENOSPC", refused)
	}
	ctx := context.Background()
	probe := time.NewTicker(20 * time.Millisecond)
	defer probe.Stop()
	// Long enough for the flusher to try (and fail) more than once.
	for start := time.Now(); time.Since(start) < max(4*FastTiming().HeartbeatTimeout, 2*flushRetry); <-probe.C {
		if _, _, err := n.s.Put(ctx, config("default", "late", "x"), WriteOptions{}); !errors.Is(err, ErrLogFull) {
			t.Fatalf("write while full: %v, want ErrLogFull (raft went through %v)", err, states())
		}
		if l, _, err := n.s.List(legion.KindConfig, "default", nil); err != nil || len(l) != len(acked) {
			t.Fatalf("list while full: %d objects, %v; want %d", len(l), err, len(acked))
		}
		if err := n.s.Barrier(ctx); err != nil {
			t.Fatalf("linearizable read while full: %v", err)
		}
	}
	if got := states(); len(got) != 0 || n.s.raft.CurrentTerm() != term {
		t.Fatalf("on a full tmpfs raft went through %v, term %d -> %d", got, term, n.s.raft.CurrentTerm())
	}
	checkAcked(t, n.s, acked)
	out := logged.String()
	if c := strings.Count(out, "no room for more entries"); c != 1 {
		t.Fatalf("the full log was reported %d times, want once:\n%s", c, out)
	}
	// bbolt grows its file too: the flusher fails, keeps the changes and
	// says so once.
	flushFailed := strings.Count(out, "writing applied changes to the store file failed")
	if flushFailed > 1 {
		t.Fatalf("the flusher's failure was logged %d times, want once:\n%s", flushFailed, out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "after", "freed"), WriteOptions{}); err != nil {
		t.Fatalf("write once space is freed: %v", err)
	}
	acked["after"] = "freed"
	if flushFailed == 1 {
		waitFor(t, "the flusher writing again", 5*time.Second, func() bool {
			return strings.Contains(logged.String(), "store file works again")
		})
	}
	if err := n.s.Close(); err != nil {
		t.Fatalf("closing once space is freed: %v", err)
	}
	n = openNode(t, "m1", dir)
	waitFor(t, "leader after a restart", 5*time.Second, n.s.IsLeader)
	checkAcked(t, n.s, acked)
}
