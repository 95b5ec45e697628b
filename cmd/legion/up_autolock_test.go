package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// upRun is legion up, run in this process (upInProcess) with args on a free API address in data, until stop
// (which fails the test if up ended with an error): its output so far
// and whether it has ended.
type upRun struct {
	out  syncBuffer
	done chan error
	stop func()
}

func upInProcess(t *testing.T, data string, args ...string) *upRun {
	t.Helper()
	r := &upRun{done: make(chan error, 1)}
	root := newRootCommand()
	root.SetOut(&r.out)
	root.SetErr(&r.out)
	ctx, cancel := context.WithCancel(context.Background())
	root.SetContext(ctx)
	root.SetArgs(append([]string{"up", "--data-dir", data, "--listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0"}, args...))
	go func() { r.done <- root.Execute() }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("up %s: %v\n%s", strings.Join(args, " "), err, r.out.String())
			}
		case <-time.After(60 * time.Second):
			t.Error("up did not stop")
		}
	}
	t.Cleanup(r.stop)
	return r
}

// until waits for up to print what matches re, and returns the match.
func (r *upRun) until(t *testing.T, re string) []string {
	t.Helper()
	pat := regexp.MustCompile(re)
	var m []string
	waitFor(t, "up to say "+re, func() bool {
		m = pat.FindStringSubmatch(r.out.String())
		return m != nil
	})
	return m
}

// legion up on a cluster with autolock on: it says the cluster is locked
// and how to unlock it, and comes up once legion unlock gives the key,
// or at once with --unlock-key-file; a key given to a cluster that is not
// locked is said to be unused, not taken silently.
func TestUpOfALockedCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	admin := filepath.Join(data, "manager", "admin.pem")
	nothing := `Nothing to deploy\. Press Ctrl-C to stop\.`

	first := upInProcess(t, data)
	api := first.until(t, `API (\S+) \(credentials`)[1]
	first.until(t, nothing)
	key, err := runLegion(t, "", "autolock", "enable", "--server", api, "--credentials", admin)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ = strings.Cut(key, "\n")
	keyFile := filepath.Join(dir, "unlock.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first.stop()
	// Its stop says the next start needs the key.
	if !strings.Contains(first.out.String(), "runs them again, given the unlock key (autolock is on: --unlock-key-file FILE, or legion unlock).") {
		t.Errorf("up's stop with autolock on does not say the next start needs the key:\n%s", first.out.String())
	}

	locked := upInProcess(t, data)
	api = locked.until(t, `is locked \(autolock is on\).* legion unlock --server (\S+) `)[1]
	if strings.Contains(locked.out.String(), "Legion is up") {
		t.Fatalf("a locked cluster said it is up:\n%s", locked.out.String())
	}
	if out, err := runLegion(t, key+"\n", "unlock", "--server", api); err != nil {
		t.Fatalf("unlock: %v\n%s", err, out)
	}
	locked.until(t, nothing)
	locked.stop()

	keyed := upInProcess(t, data, "--unlock-key-file", keyFile)
	api = keyed.until(t, `API (\S+) \(credentials`)[1]
	keyed.until(t, nothing)
	if out := keyed.out.String(); strings.Contains(out, "locked") || strings.Contains(out, "warning") {
		t.Errorf("up --unlock-key-file of a locked cluster:\n%s", out)
	}
	if _, err := runLegion(t, "", "autolock", "disable", "--server", api, "--credentials", admin); err != nil {
		t.Fatal(err)
	}
	keyed.stop()

	unneeded := upInProcess(t, data, "--unlock-key-file", keyFile)
	unneeded.until(t, nothing)
	if !strings.Contains(unneeded.out.String(), "warning: --unlock-key-file: the cluster was not locked (autolock is off), so the key was not used") {
		t.Errorf("up --unlock-key-file of a cluster not locked:\n%s", unneeded.out.String())
	}
	unneeded.stop()
	if out := unneeded.out.String(); !strings.Contains(out, "Stopped: no pod is left.") || strings.Contains(out, "unlock key (autolock is on") {
		t.Errorf("up's stop with autolock off:\n%s", out)
	}
}
