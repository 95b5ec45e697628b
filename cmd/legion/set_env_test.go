package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// set env changes containers' environment as kubectl set env does: a
// value set in place or added, one from a Secret or Config, one removed,
// in every container or the one -c names; --list prints it; kubectl's
// --from and bad input are refused with nothing changed.
func TestSetEnv(t *testing.T) {
	t.Parallel()
	c, run := managerWith(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod:
    initContainers: [{name: migrate, image: shop/web:1}]
    containers:
      - {name: web, image: shop/web:1, env: [{name: MODE, value: dev}, {name: KEEP, value: "1"}]}
      - {name: log, image: shop/log:1}
---
apiVersion: legion/v1
kind: Secret
metadata: {name: pw}
spec: {data: czNjcmV0}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: report, image: shop/tools:1}]}}
`)
	ctx := context.Background()
	env := func(kind legion.Kind, name string) string {
		t.Helper()
		o, err := c.Client().Get(ctx, kind, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ctr := range legion.PodOf(o).AllContainers() {
			var vars []string
			for _, e := range ctr.Env {
				vars = append(vars, e.Name+"="+e.Value+e.Secret+e.Config)
			}
			out = append(out, ctr.Name+":"+strings.Join(vars, ","))
		}
		return strings.Join(out, " ")
	}

	if out, err := run("set", "env", "web", "-c", "web", "MODE=prod", "LEVEL=2"); err != nil || out != "service/web env updated\n" {
		t.Fatalf("set env -c web: %v %q", err, out)
	}
	if got := env(legion.KindService, "web"); got != "migrate: web:MODE=prod,KEEP=1,LEVEL=2 log:" {
		t.Errorf("after set env -c web: %s", got)
	}
	if out, err := run("set", "env", "service/web", "LEVEL-", "--secret", "PW=pw"); err != nil || out != "service/web env updated\n" {
		t.Fatalf("set env of every container: %v %q", err, out)
	}
	if got := env(legion.KindService, "web"); got != "migrate:PW=pw web:MODE=prod,KEEP=1,PW=pw log:PW=pw" {
		t.Errorf("after set env LEVEL- --secret PW=pw: %s", got)
	}
	if out, err := run("set", "env", "web", "-c", "web", "MODE=prod"); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("set env to what it is: %v %q", err, out)
	}
	if out, err := run("set", "env", "web", "--list", "-c", "web"); err != nil || out != "# service/web, container web\nMODE=prod\nKEEP=1\n# PW from secret pw\n" {
		t.Errorf("set env --list -c web: %v %q", err, out)
	}
	if _, err := run("set", "env", "cronjob/nightly", "--config", "TZ_FILE=tz", "A=b"); err == nil || !strings.Contains(err.Error(), "Config tz") {
		t.Errorf("set env naming a Config that does not exist: %v", err)
	}
	if _, err := run("set", "env", "cronjob/nightly", "A=b"); err != nil {
		t.Fatal(err)
	}
	if got := env(legion.KindCronJob, "nightly"); got != "report:A=b" {
		t.Errorf("after set env cronjob/nightly: %s", got)
	}

	before := env(legion.KindService, "web")
	for _, tc := range []struct{ args, want string }{
		{"set env web -c nope A=1", "no container named nope: the pod has migrate, web, log"},
		{"set env web A", `"A": expected KEY=VALUE to set a variable or KEY- to remove it`},
		{"set env web A=1 A-", "variable A is given twice"},
		{"set env web --secret PW", `--secret "PW": expected KEY=NAME`},
		{"set env web", "nothing to change"},
		{"set env web --from secret/pw", "--from secret/pw: a Legion Secret or Config holds one value, not keys to import"},
		{"set env web --list A=1", "--list prints the environment: give the workload alone"},
		{"set env web --secret PW=Not_A_Name", "spec.pod.initContainers[0].env[0].secret"},
		{"set env cronjob/nightly A=c --wait", "--wait follows a service's rollout"},
	} {
		if _, err := run(strings.Fields(tc.args)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("legion %s: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if after := env(legion.KindService, "web"); after != before {
		t.Errorf("refused set env changed the service: %s, was %s", after, before)
	}
}
