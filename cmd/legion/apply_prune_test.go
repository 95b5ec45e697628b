package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// apply -l applies the manifests' objects with those labels, and with
// --prune deletes the objects with them, in the namespaces applied to,
// that the manifests no longer hold, as kubectl apply --prune does: of
// workloads, Configs, Secrets and Routes only, never a CronJob's Jobs,
// and nothing in a dry run.
func TestApplyPrune(t *testing.T) {
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, string, error) {
		var out, errOut syncBuffer
		err := rootWith(&out, &errOut, append(args, flags...)...).ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "shop.yaml")
	config := func(name, labels string) string {
		return "apiVersion: legion/v1\nkind: Config\nmetadata: {name: " + name + ", labels: {" + labels + "}}\nspec: {text: x}\n---\n"
	}
	write := func(docs ...string) {
		t.Helper()
		if err := os.WriteFile(manifest, []byte(strings.Join(docs, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	web := `apiVersion: legion/v1
kind: Service
metadata: {name: web, labels: {app: shop}}
spec:
  pod: {containers: [{name: app, image: localhost/hello:1, pullPolicy: never}]}
---
`
	nightly := `apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, labels: {app: shop}}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: app, image: localhost/hello:1, pullPolicy: never}]}}
---
`
	write(web, nightly, config("a", "app: shop"), config("b", "app: shop"), config("blog", "app: blog"))
	out, errOut, err := run("apply", "-f", manifest, "-l", "app=shop", "--prune")
	if err != nil || strings.Contains(out, "pruned") || !strings.Contains(errOut, "note: 1 of the manifests' 5 objects are not applied: their labels do not match -l app=shop") {
		t.Fatalf("the first apply: %v\n%s%s", err, out, errOut)
	}
	if _, err := n.Client.Get(ctx, legion.KindConfig, "default", "blog"); err == nil {
		t.Fatal("an object -l does not select was applied")
	}
	// Made beside the manifests: one -l selects, one it does not, one in
	// a namespace the manifests do not write to, a Volume, a Job of the
	// CronJob.
	for _, o := range []string{config("manual", "app: shop"), config("plain", "tier: x"),
		"apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: other}\n---\n" +
			"apiVersion: legion/v1\nkind: Config\nmetadata: {name: there, namespace: other, labels: {app: shop}}\nspec: {text: x}\n---\n" +
			"apiVersion: legion/v1\nkind: Volume\nmetadata: {name: data, labels: {app: shop}}\nspec: {driver: zfs, size: 1Gi}\n"} {
		objs, err := legion.ParseManifest("extra", []byte(o))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Client.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out, _, err := run("create", "job", "now", "--from", "cronjob/nightly"); err != nil {
		t.Fatalf("create job --from: %v\n%s", err, out)
	}
	if out, _, err := run("label", "job", "now", "app=shop"); err != nil { // selected, yet the CronJob's
		t.Fatalf("label job: %v\n%s", err, out)
	}

	// web and b leave the manifests.
	write(nightly, config("a", "app: shop"))
	out, _, err = run("apply", "-f", manifest, "-l", "app=shop", "--prune", "--dry-run")
	if err != nil || !slices.Equal(pruned(out), []string{"config/b", "config/manual", "service/web"}) || !strings.Contains(out, "service/web pruned (dry run)") {
		t.Fatalf("apply --prune --dry-run: %v\n%s", err, out)
	}
	if _, err := n.Client.Get(ctx, legion.KindService, "default", "web"); err != nil {
		t.Fatalf("a dry run pruned service/web: %v", err)
	}
	out, errOut, err = run("apply", "-f", manifest, "-l", "app=shop", "--prune")
	if err != nil || !slices.Equal(pruned(out), []string{"config/b", "config/manual", "service/web"}) {
		t.Fatalf("apply --prune: %v\n%s%s", err, out, errOut)
	}
	for _, gone := range []struct {
		kind legion.Kind
		name string
	}{{legion.KindService, "web"}, {legion.KindConfig, "b"}, {legion.KindConfig, "manual"}} {
		if _, err := n.Client.Get(ctx, gone.kind, "default", gone.name); err == nil {
			t.Errorf("%s %s is still there after the prune", gone.kind, gone.name)
		}
	}
	for _, kept := range []struct {
		kind     legion.Kind
		ns, name string
	}{{legion.KindConfig, "default", "a"}, {legion.KindCronJob, "default", "nightly"}, {legion.KindConfig, "default", "plain"},
		{legion.KindConfig, "other", "there"}, {legion.KindVolume, "default", "data"}, {legion.KindJob, "default", "now"}} {
		if _, err := n.Client.Get(ctx, kept.kind, kept.ns, kept.name); err != nil {
			t.Errorf("%s %s/%s was pruned: %v", kept.kind, kept.ns, kept.name, err)
		}
	}

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"apply", "-f", manifest, "--prune"}, "--prune needs -l SELECTOR"},
		{[]string{"apply", "-f", manifest, "-l", "app in (shop"}, "-l app in (shop"},
		{[]string{"apply", "-f", manifest, "-l", "app=none"}, "no object of the manifests has labels that match -l app=none"},
	} {
		if _, _, err := run(bad.args...); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("legion %s: %v, want an error containing %q", strings.Join(bad.args, " "), err, bad.says)
		}
	}
}

// pruned is the objects an apply's output says it pruned, sorted.
func pruned(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if obj, _, ok := strings.Cut(line, " pruned"); ok {
			got = append(got, obj)
		}
	}
	slices.Sort(got)
	return got
}
