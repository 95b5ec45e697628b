package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// get and describe take objects as kubectl does, KIND/NAME... or KIND
// NAME..., as delete does, and as -o name prints them: one alone as
// before, several in a table per kind (kind/name when kinds differ), and
// one that cannot be read said after the others; describe KIND describes
// them all.
func TestGetAndDescribeNamedObjects(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1})
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Config
metadata: {name: a}
spec: {text: x}
---
apiVersion: legion/v1
kind: Config
metadata: {name: b}
spec: {text: y}
---
apiVersion: legion/v1
kind: Secret
metadata: {name: s}
spec: {data: eg==}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop, labels: {team: shop}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", c.Managers[0].Addr, "--credentials", c.AdminFile()}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }

	lines := func(out string) []string { return strings.Split(strings.TrimSpace(out), "\n") }
	out, err := run("get", "config/a", "cfg/b")
	if got := lines(out); err != nil || len(got) != 3 || !strings.HasPrefix(got[1], "a ") || !strings.HasPrefix(got[2], "b ") {
		t.Errorf("get config/a cfg/b: %v\n%s", err, out)
	}
	out, err = run("get", "configs", "a", "b")
	if got := lines(out); err != nil || len(got) != 3 || !strings.HasPrefix(got[1], "a ") || !strings.HasPrefix(got[2], "b ") {
		t.Errorf("get configs a b: %v\n%s", err, out)
	}
	out, err = run("get", "config/a", "secret/s")
	if err != nil || !strings.Contains(out, "\nconfig/a ") || !strings.Contains(out, "\n\nNAME") || !strings.Contains(out, "\nsecret/s ") {
		t.Errorf("get config/a secret/s: %v\n%s", err, out)
	}
	// One alone is printed as get KIND NAME prints it: the object, not a
	// list of one.
	out, err = run("get", "config/a", "-o", "yaml")
	if err != nil || !strings.HasPrefix(out, "apiVersion: legion/v1\nkind: Config\n") {
		t.Errorf("get config/a -o yaml: %v\n%s", err, out)
	}
	out, err = run("get", "configs", "a", "nothere", "b")
	if err == nil || !strings.Contains(err.Error(), "Config default/nothere: not found") || len(lines(out)) != 3 {
		t.Errorf("get configs a nothere b: %v\n%s", err, out)
	}
	if _, err := run("get", "config/a", "-w"); err == nil || !strings.Contains(err.Error(), "a watch follows one kind") {
		t.Errorf("get config/a -w: %v", err)
	}

	// --show-labels adds kubectl's column, once.
	out, err = run("get", "ns", "--show-labels")
	if err != nil || !strings.Contains(out, "LABELS") || !strings.Contains(out, "team=shop") {
		t.Errorf("get ns --show-labels: %v\n%s", err, out)
	}
	out, err = run("get", "config/a", "ns/shop", "--show-labels")
	if err != nil || strings.Count(out, "LABELS") != 2 || !strings.Contains(out, "team=shop") {
		t.Errorf("get config/a ns/shop --show-labels: %v\n%s", err, out)
	}

	out, err = run("describe", "config/a", "secret/s")
	if err != nil || !strings.Contains(out, "Name:        a\n") || !strings.Contains(out, "Name:        s\n") || !strings.Contains(out, "Kind:        Secret\n") {
		t.Errorf("describe config/a secret/s: %v\n%s", err, out)
	}
	out, err = run("describe", "configs", "a", "b")
	if err != nil || !strings.Contains(out, "Name:        a\n") || !strings.Contains(out, "Name:        b\n") {
		t.Errorf("describe configs a b: %v\n%s", err, out)
	}
	// A kind alone describes every one of the namespace, as kubectl's.
	out, err = run("describe", "configs")
	if err != nil || strings.Count(out, "Name:        ") != 2 || !strings.Contains(out, "Name:        a\n") || !strings.Contains(out, "Name:        b\n") {
		t.Errorf("describe configs: %v\n%s", err, out)
	}
	if out, err := run("describe", "routes"); err != nil || out != "No routes found.\n" {
		t.Errorf("describe routes, of which there are none: %v %q", err, out)
	}
}
