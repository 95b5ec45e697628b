package main

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// legion label sets and removes labels of objects named as kubectl names
// them; a label with another value changes only with --overwrite, and an
// object refused keeps its labels without keeping the others from being
// labelled.
func TestLabelCommand(t *testing.T) {
	t.Parallel()
	s, run := initDaemon(t)
	const configs = `apiVersion: legion/v1
kind: Config
metadata: {name: a, labels: {app: shop}}
spec: {text: a}
---
apiVersion: legion/v1
kind: Config
metadata: {name: b, labels: {tier: back}}
spec: {text: b}
---
apiVersion: legion/v1
kind: Config
metadata: {name: c, namespace: other}
spec: {text: c}
`
	if out, err := run(configs, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	labels := func(ns, name string) string {
		t.Helper()
		o, _, err := s.Store().Get(legion.KindConfig, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return labelPairs(o.GetMetadata().Labels)
	}

	out, err := run("", "label", "config", "a", "b", "tier=front")
	if err == nil || !strings.Contains(err.Error(), `label config/b: label tier has the value "back" already: --overwrite changes it`) {
		t.Fatalf("label config a b tier=front: %v, want b refused", err)
	}
	if out != "config/a labelled: app=shop tier=front\n" || labels("default", "a") != "app=shop tier=front" || labels("default", "b") != "tier=back" {
		t.Fatalf("after a refused for b: %q; a: %s, b: %s", out, labels("default", "a"), labels("default", "b"))
	}
	if out, err := run("", "label", "cfg/b", "tier=front", "--overwrite"); err != nil || out != "config/b labelled: tier=front\n" {
		t.Fatalf("--overwrite: %v %q", err, out)
	}
	if out, err := run("", "label", "config/a", "config/b", "tier=front"); err != nil || strings.Count(out, "unchanged: its labels are so already") != 2 {
		t.Fatalf("the same value again: %v %q", err, out)
	}
	if out, err := run("", "label", "config/a", "app-", "tier-"); err != nil || out != "config/a labelled: <none>\n" || labels("default", "a") != "<none>" {
		t.Fatalf("removing: %v %q", err, out)
	}
	if out, err := run("", "label", "config", "c", "-n", "other", "env=dev"); err != nil || out != "config/c -n other labelled: env=dev\n" {
		t.Fatalf("-n other: %v %q", err, out)
	}

	for args, says := range map[string]string{
		"label config a":            "expected the objects (KIND NAME... or KIND/NAME...), then KEY=VALUE or KEY-",
		"label tier=x":              "expected the objects",
		"label config/a x=1 x-":     `label "x" is both set and removed`,
		"label config/nothing x=1":  "label config/nothing: Config default/nothing: not found",
		"label widget/a x=1":        `unknown kind "widget"`,
		"label config/a config x=1": `"config": expected KIND/NAME, as the arguments before it`,
	} {
		if _, err := run("", strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if got := labels("default", "b"); got != "tier=front" {
		t.Errorf("refused labels changed config b: %s", got)
	}

	// -l takes kubectl's selectors; the manager selects by equal labels,
	// the CLI keeps what the rest of the selector holds. a has no labels
	// now, b tier=front, other/c env=dev.
	for sel, want := range map[string]string{
		"tier":                   "config/b\n",
		"!tier":                  "config/a\n",
		"tier!=front":            "config/a\n",
		"tier in (front,back)":   "config/b\n",
		"tier notin (back),!env": "config/a\nconfig/b\n",
		"tier=front,tier!=front": "",
	} {
		if out, err := run("", "get", "configs", "-l", sel, "-o", "name"); err != nil || out != want {
			t.Errorf("get configs -l %q: %v %q, want %q", sel, err, out, want)
		}
	}
	if out, err := run("", "get", "all", "-A", "-l", "env in (dev)", "-o", "name"); err != nil || out != "" {
		t.Errorf("get all -l selects workloads alone: %v %q", err, out)
	}
	if _, err := run("", "get", "configs", "-l", "tier!"); err == nil || !strings.Contains(err.Error(), "-l tier!: unable to parse requirement") {
		t.Errorf("get -l tier!: %v, want it refused", err)
	}
	if out, err := run("", "delete", "configs", "-l", "!tier"); err != nil || !strings.Contains(out, "config/a deleted") || strings.Contains(out, "config/b") {
		t.Errorf("delete configs -l '!tier': %v %q", err, out)
	}
	if _, _, err := s.Store().Get(legion.KindConfig, legion.DefaultNamespace, "b"); err != nil {
		t.Errorf("delete -l '!tier' deleted config b: %v", err)
	}
}
