package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// set resources changes containers' CPU and memory as kubectl set
// resources does: what is given is set, the rest kept, in every container
// or the one -c names; a request above its limit, another resource and
// bad input are refused with nothing changed.
func TestSetResources(t *testing.T) {
	t.Parallel()
	c, run := managerWith(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod:
    containers:
      - {name: web, image: shop/web:1, resources: {requests: {cpu: 100m}, limits: {memory: 256Mi, maxproc: 64}}}
      - {name: log, image: shop/log:1}
`)
	ctx := context.Background()
	resources := func() string {
		t.Helper()
		o, err := c.Client().Get(ctx, legion.KindService, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ctr := range legion.PodOf(o).AllContainers() {
			r := ctr.Resources
			out = append(out, ctr.Name+":"+r.Requests.CPU.String()+"/"+r.Requests.Memory.String()+"-"+r.Limits.CPU.String()+"/"+r.Limits.Memory.String()+"/"+
				strings.Repeat("p", min(r.Limits.Maxproc, 1)))
		}
		return strings.Join(out, " ")
	}

	if out, err := run("set", "resources", "web", "-c", "web", "--limits", "cpu=1,memory=512Mi", "--requests=memory=128Mi"); err != nil || out != "service/web resources updated\n" {
		t.Fatalf("set resources -c web: %v %q", err, out)
	}
	if got, want := resources(), "web:100m/128Mi-1/512Mi/p log:0/0-0/0/"; got != want {
		t.Errorf("after set resources -c web: %s, want %s", got, want)
	}
	if out, err := run("set", "resources", "service/web", "--requests", "cpu=50m"); err != nil || out != "service/web resources updated\n" {
		t.Fatalf("set resources of every container: %v %q", err, out)
	}
	if got, want := resources(), "web:50m/128Mi-1/512Mi/p log:50m/0-0/0/"; got != want {
		t.Errorf("after set resources --requests cpu=50m: %s, want %s", got, want)
	}
	if out, err := run("set", "resources", "web", "-c", "*", "--requests", "cpu=50m"); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("set resources to what is there: %v %q", err, out)
	}
	before := resources()
	for args, says := range map[string]string{
		"set resources web -c web --requests memory=1Gi": "requests.memory: 1Gi is above the limit 512Mi",
		"set resources web --limits maxproc=10":          "--limits maxproc: only cpu and memory are set here",
		"set resources web --limits cpu":                 `--limits "cpu": expected cpu=QUANTITY`,
		"set resources web --requests memory=lots":       "--requests memory=lots:",
		"set resources web":                              "give --limits or --requests",
		"set resources web -c nope --limits cpu=1":       "no container named nope: the pod has web, log",
	} {
		if _, err := run(strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if got := resources(); got != before {
		t.Errorf("a refused set resources changed the service: %s, was %s", got, before)
	}
}
