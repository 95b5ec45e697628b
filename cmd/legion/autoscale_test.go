package main

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// legion autoscale sets a service's spec.autoscale from kubectl's flags,
// moving its count into the bounds, and --off removes it keeping the
// count; what admission refuses (no requests to take a percentage of)
// changes nothing.
func TestAutoscaleCommand(t *testing.T) {
	t.Parallel()
	s, run := initDaemon(t)
	const services = `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 5
  pod:
    containers:
      - {name: web, image: localhost/hello:1, resources: {requests: {cpu: 50m, memory: 32Mi}}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: bare}
spec:
  replicas: 2
  pod: {containers: [{name: bare, image: localhost/hello:1}]}
`
	if out, err := run(services, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	get := func(name string) *legion.Service {
		t.Helper()
		o, _, err := s.Store().Get(legion.KindService, legion.DefaultNamespace, name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service)
	}

	out, err := run("", "autoscale", "web", "--min", "2", "--max", "3")
	if err != nil || out != "service/web autoscaled: 2 to 3 replicas, cpu 80% of requests, shrinks after 5m; 3 replicas now\n" {
		t.Fatalf("autoscale web --min 2 --max 3: %v %q", err, out)
	}
	if w := get("web"); w.Spec.Autoscale == nil || w.Spec.Autoscale.Min != 2 || w.Spec.Autoscale.Max != 3 || w.Spec.Autoscale.CPU != 80 || w.Spec.Autoscale.Memory != 0 || *w.Spec.Replicas != 3 {
		t.Fatalf("after autoscale: %+v, replicas %d", w.Spec.Autoscale, *w.Spec.Replicas)
	}
	if out, err := run("", "autoscale", "service/web", "--min", "2", "--max", "3"); err != nil || !strings.HasPrefix(out, "service/web unchanged: it autoscales so already") {
		t.Fatalf("the same again: %v %q", err, out)
	}
	if out, err := run("", "autoscale", "service", "web", "--max", "4", "--memory-percent", "50", "--down-delay", "1m"); err != nil || !strings.Contains(out, "1 to 4 replicas, memory 50% of requests, shrinks after 1m") {
		t.Fatalf("autoscale service web with a memory target: %v %q", err, out)
	}
	if a := get("web").Spec.Autoscale; a.Min != 1 || a.Max != 4 || a.CPU != 0 || a.Memory != 50 || a.DownDelay == nil || time.Duration(*a.DownDelay) != time.Minute {
		t.Fatalf("after the memory target: %+v", a)
	}

	for args, says := range map[string]string{
		"autoscale web":                         "--max is required",
		"autoscale web --off --max 3":           "--off removes autoscaling: --max has no meaning with it",
		"autoscale job/web --max 3":             "expected a service (NAME or service/NAME), not a Job",
		"autoscale web bare --max 3":            "expected one service",
		"autoscale deployment web --max 3":      "a Deployment is a Service here",
		"autoscale web --max 3 --min 4":         "spec.autoscale.max: 3 is below min 4",
		"autoscale web --max 3 --cpu-percent 0": "needs a target",
		"autoscale bare --max 3":                "spec.pod.containers[0].resources.requests.cpu: missing: autoscale's cpu target is a percentage of it",
		"autoscale nothing --max 3":             "not found",
	} {
		if _, err := run("", strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if b := get("bare"); b.Spec.Autoscale != nil || *b.Spec.Replicas != 2 {
		t.Errorf("a refused autoscale changed service bare: %+v, replicas %d", b.Spec.Autoscale, *b.Spec.Replicas)
	}

	before := get("web")
	out, err = run("", "autoscale", "web", "--off")
	if want := before.WantedReplicas(); err != nil || out != "service/web autoscale off: it keeps "+replicasWord(want)+"\n" {
		t.Fatalf("autoscale web --off: %v %q, want it to keep %d", err, out, want)
	}
	if w := get("web"); w.Spec.Autoscale != nil || *w.Spec.Replicas != before.WantedReplicas() {
		t.Fatalf("after --off: %+v, replicas %d", w.Spec.Autoscale, *w.Spec.Replicas)
	}
	if out, err := run("", "autoscale", "web", "--off"); err != nil || out != "service/web unchanged: it does not autoscale\n" {
		t.Fatalf("--off again: %v %q", err, out)
	}
	if _, err := run("", "get", "hpa"); err == nil || !strings.Contains(err.Error(), "a HorizontalPodAutoscaler is a Service's spec.autoscale here (legion autoscale)") {
		t.Errorf("legion get hpa: %v", err)
	}
}
