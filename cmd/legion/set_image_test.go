package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// set image changes containers' images as kubectl set image does: by
// container name (init containers too) or * for all, for a service by
// its name or any workload by KIND/NAME; a container the pod lacks is
// refused, naming those it has, and nothing changes.
func TestSetImage(t *testing.T) {
	t.Parallel()
	c, run := managerWith(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod:
    initContainers: [{name: migrate, image: shop/web:1}]
    containers: [{name: web, image: shop/web:1}, {name: log, image: shop/log:1}]
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: report, image: shop/tools:1}]}}
`)
	ctx := context.Background()
	images := func(kind legion.Kind, name string) string {
		t.Helper()
		o, err := c.Client().Get(ctx, kind, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ctr := range legion.PodOf(o).AllContainers() {
			out = append(out, ctr.Name+"="+ctr.Image)
		}
		return strings.Join(out, " ")
	}

	if out, err := run("set", "image", "web", "web=shop/web:2", "migrate=shop/web:2"); err != nil || out != "service/web image updated\n" {
		t.Fatalf("set image web: %v %q", err, out)
	}
	if got := images(legion.KindService, "web"); got != "migrate=shop/web:2 web=shop/web:2 log=shop/log:1" {
		t.Errorf("after set image web: %s", got)
	}
	if out, err := run("set", "image", "service/web", "web=shop/web:2"); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("set image to the images it has: %v %q", err, out)
	}
	if _, err := run("set", "image", "cronjob/nightly", "*=shop/tools:2"); err != nil {
		t.Fatal(err)
	}
	if got := images(legion.KindCronJob, "nightly"); got != "report=shop/tools:2" {
		t.Errorf("after set image cronjob/nightly *=: %s", got)
	}
	for _, tc := range []struct{ args, want string }{
		{"set image web nope=x web=shop/web:3", "no container named nope: the pod has migrate, web, log"},
		{"set image web web", `"web": expected CONTAINER=IMAGE`},
		{"set image web *=x web=y", "*=IMAGE sets every container: name no other"},
		{"set image volume/data c=x", "expected a service, job or cron job"},
		{"set image cronjob/nightly report=x --wait", "--wait follows a service's rollout"},
	} {
		if _, err := run(strings.Fields(tc.args)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("legion %s: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if got := images(legion.KindService, "web"); got != "migrate=shop/web:2 web=shop/web:2 log=shop/log:1" {
		t.Errorf("a refused set image changed the service: %s", got)
	}
}

// managerWith is a one-manager cluster holding manifest's objects, and a
// legion command run against it, for the tests of commands that change
// objects (set, label).
func managerWith(t *testing.T, manifest string) (*testcluster.Cluster, func(args ...string) (string, error)) {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Managers: 1})
	objs, err := legion.ParseManifest("t", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", c.Managers[0].Addr, "--credentials", c.AdminFile()}
	return c, func(args ...string) (string, error) { return runLegion(t, "", append(flags, args...)...) }
}
