package server

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// A Service applied without spec.pod.restartedAt keeps the stored one
// (legion rollout restart's): the manifest applied again is unchanged,
// and a change to it keeps the restart; one that names a time sets it.
func TestApplyKeepsARestart(t *testing.T) {
	t.Parallel()
	_, c := admitFixture(t)
	ctx := context.Background()
	svc := func(image, restarted string) string {
		pod := "containers: [{name: c, image: " + image + "}]"
		if restarted != "" {
			pod += ", restartedAt: '" + restarted + "'"
		}
		return "apiVersion: legion/v1\nkind: Service\nmetadata: {name: web}\nspec:\n  pod: {" + pod + "}\n"
	}
	restartedAt := func() *time.Time {
		t.Helper()
		o, err := c.Get(ctx, legion.KindService, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service).Spec.Pod.RestartedAt
	}
	apply := func(yaml string, dry bool) client.Result {
		t.Helper()
		res, err := c.Apply(ctx, mustParse(t, yaml), client.ApplyOptions{DryRun: dry})
		if err != nil || len(res) != 1 {
			t.Fatalf("apply: %v %v", res, err)
		}
		return res[0]
	}
	applyOK(t, c, svc("web:1", ""))
	if r := restartedAt(); r != nil {
		t.Fatalf("restartedAt %v before any restart", r)
	}
	const at = "2026-12-05T07:00:00Z"
	if r := apply(svc("web:1", at), false); r.Outcome != client.Updated {
		t.Fatalf("a restart: %s, want updated", r.Outcome)
	}
	want, _ := time.Parse(time.RFC3339, at)
	for _, dry := range []bool{true, false} {
		if r := apply(svc("web:1", ""), dry); r.Outcome != client.Unchanged {
			t.Fatalf("the manifest again (dry run %v): %s, want unchanged: it keeps the restart", dry, r.Outcome)
		}
	}
	if r := apply(svc("web:2", ""), false); r.Outcome != client.Updated {
		t.Fatalf("a new image: %s, want updated", r.Outcome)
	}
	if r := restartedAt(); r == nil || !r.Equal(want) {
		t.Fatalf("after a new image applied without it: restartedAt %v, want %s kept", r, at)
	}
	const later = "2026-12-05T08:00:00Z"
	apply(svc("web:2", later), false)
	if r := restartedAt(); r == nil || r.Format(time.RFC3339) != later {
		t.Fatalf("restartedAt %v, want %s: a time named is set", r, later)
	}
}
