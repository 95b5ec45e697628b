package main

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// rollout history shows the one earlier spec Legion keeps, what the last
// update changed from it, and why a failed update was rolled back.
func TestPrintHistory(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  pod: {containers: [{name: web, image: shop/web:1.5}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := objs[0].(*legion.Service)
	if err := legion.Admit(s); err != nil {
		t.Fatal(err)
	}
	s.Metadata.Generation = 4
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	if err := printHistory(&b, s, now); err != nil {
		t.Fatal(err)
	}
	if want := "service shop/web: generation 4, images shop/web:1.5\nNo update yet: there is no earlier spec to go back to.\n"; b.String() != want {
		t.Errorf("no update:\n%s\nwant\n%s", b.String(), want)
	}

	prev := legion.Clone(s).(*legion.Service).Spec
	prev.Pod.Containers[0].Image = "shop/web:1.4"
	started, ended := now.Add(-3*time.Minute), now.Add(-time.Minute)
	s.Status.Update = &legion.UpdateStatus{State: legion.UpdateRolledBack, Started: &started, Completed: &ended, PreviousSpec: &prev,
		Failure: "task web-2-3 failed within the monitor window"}
	b.Reset()
	if err := printHistory(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Last update: rolled-back, started 3m ago, ended 60s ago: task web-2-3 failed within the monitor window\n",
		"It came from images shop/web:1.4; legion rollback (rollout undo) puts that spec back.\n",
		"--- before the update\n+++ now\n",
		"\n-            - image: shop/web:1.4\n+            - image: shop/web:1.5\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("history lacks %q:\n%s", want, b.String())
		}
	}
}
