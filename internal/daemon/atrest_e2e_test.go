package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// Encryption at rest on real daemons: a Secret applied on three managers
// and used by a worker's running task, as a file and in the environment,
// is in no file under any manager's or the worker's data directory,
// neither its value nor its base64 (the form objects carry it in):
// store.db, the Raft log's segments, the vote and snapshots included.
func TestSecretIsInNoFileOfAnyDataDirectory(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3, Leader: true, Workers: 1})
	cl := c.Client()
	startWorkerAgents(t, c)
	value := "s3cret-" + strings.TrimPrefix(marker(t), "/data/marker-")
	applyManifest(t, cl, `apiVersion: legion/v1
kind: Secret
metadata: {name: token}
spec: {text: `+value+`}
---
`+testPod("Service", "envsvc", "web", listen8080)+`        env: [{name: TOKEN, secret: token}]
        secrets: [{name: token}]
`+servesHTTP("100ms"))
	// A ready task answers; on a loaded machine the one listed may be on
	// its way out (replaced meanwhile), so the next one is asked then.
	var body []byte
	var last error
	t.Cleanup(func() {
		if body == nil {
			t.Logf("the last answer's error: %v", last)
		}
	})
	poll(t, "a ready task of the service to answer", 90*time.Second, func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range ts {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "envsvc" && tk.Status.Ready {
				resp, err := http.Get("http://" + net.JoinHostPort(tk.Status.IP, "8080") + "/env/TOKEN")
				if last = err; err != nil {
					continue
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				return true
			}
		}
		return false
	})
	if strings.TrimSpace(string(body)) != value {
		t.Fatalf("the container's TOKEN is %q, want the secret's value", body)
	}
	// Snapshots too: every manager takes one.
	for _, m := range c.Managers {
		if err := m.Store().Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", m.Addr, err)
		}
	}
	needles := [][]byte{[]byte(value), []byte(base64.StdEncoding.EncodeToString([]byte(value)))}
	dirs := []string{c.Workers[0].Dir}
	for _, m := range c.Managers {
		dirs = append(dirs, m.Dir)
	}
	// What is mounted under a data directory is not in it: a container's
	// root holds its secrets by a bind mount from the run directory.
	mounted := mountPoints(t)
	scanned := 0
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if mounted[p] {
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			// Regular files only: a running container's root holds devices.
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			scanned++
			for _, n := range needles {
				if bytes.Contains(data, n) {
					t.Errorf("%s holds the secret (%q)", p, n)
				}
			}
			return nil
		})
	}
	if scanned < 10 {
		t.Fatalf("only %d files scanned: the data directories are not where the test looks", scanned)
	}
}

// mountPoints lists where something is mounted, from /proc/self/mountinfo.
func mountPoints(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("listing mounts: %v", err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			p, err := strconv.Unquote(`"` + strings.ReplaceAll(f[4], `"`, `\"`) + `"`)
			if err != nil {
				p = f[4]
			}
			out[p] = true
		}
	}
	return out
}
