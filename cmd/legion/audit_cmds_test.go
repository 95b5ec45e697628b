package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// legion audit lists the cluster's events, narrowed by its flags, and
// refuses what it cannot read.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1, Leader: true})
	flags := []string{"--server", c.Managers[0].Addr, "--credentials", c.AdminFile()}
	cfg, _ := legion.New(legion.KindConfig)
	cfg.GetMetadata().Namespace, cfg.GetMetadata().Name = "default", "audited-cfg"
	cfg.(*legion.Config).Spec.Data = []byte("v")
	if _, err := c.Client().ApplyOne(context.Background(), cfg, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	var out string
	testcluster.WaitFor(t, "the apply in legion audit", 10*time.Second, func() bool {
		var err error
		out, err = runLegion(t, "", append([]string{"audit", "--action", "apply", "--kind", "config", "--since", "1h"}, flags...)...)
		return err == nil && strings.Contains(out, "Config default/audited-cfg")
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[1], "admin:admin") || !strings.Contains(lines[1], " ok ") {
		t.Fatalf("legion audit printed:\n%s", out)
	}
	if out, err := runLegion(t, "", append([]string{"audit", "--denied"}, flags...)...); err != nil || strings.Contains(out, "audited-cfg") {
		t.Fatalf("--denied listed the apply or failed: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", append([]string{"audit", "--since", "yesterday"}, flags...)...); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("--since yesterday: %v", err)
	}
	if _, err := runLegion(t, "", "daemon", "--data-dir", t.TempDir(), "--audit-retention-days", "0"); err == nil || !strings.Contains(err.Error(), "--audit-retention-days 0") {
		t.Fatalf("--audit-retention-days 0: %v", err)
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{"90m": now.Add(-90 * time.Minute), "2026-02-28T00:00:00Z": time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC)} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("%s: %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"-1h", "last week"} {
		if _, err := parseSince(in, now); err == nil {
			t.Errorf("%s: taken", in)
		}
	}
}
