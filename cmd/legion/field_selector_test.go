package main

import (
	"strings"
	"testing"
)

// --field-selector of get, get all and delete keeps the objects whose
// fields (by their path in the YAML) hold every term, as kubectl's does;
// a path that names no single value of the kind is refused naming it.
func TestFieldSelector(t *testing.T) {
	t.Parallel()
	_, run := initDaemon(t)
	svc := func(name, more string) string {
		return "apiVersion: legion/v1\nkind: Service\nmetadata: {name: " + name + ", labels: {app: " + name + "}}\nspec:\n" + more +
			"  pod: {containers: [{name: app, image: localhost/hello:1, pullPolicy: never}]}\n---\n"
	}
	if out, err := run(svc("web", "  replicas: 2\n")+svc("api", "  replicas: 3\n")+svc("agent", "  mode: global\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	names := func(out string) string {
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			got = append(got, strings.Fields(line)[0])
		}
		return strings.Join(got, " ")
	}
	for sel, want := range map[string]string{
		"spec.replicas=3":                   "api",
		"spec.mode!=global":                 "api web",
		"metadata.name=web,spec.replicas=2": "web",
		"metadata.labels.app==agent":        "agent",
		"status.message=":                   "agent api web", // a field left out is empty
	} {
		out, err := run("", "get", "services", "--field-selector", sel)
		if err != nil || names(out) != want {
			t.Errorf("get services --field-selector %s: %v\n%s\nwant %s", sel, err, out, want)
		}
	}
	if out, err := run("", "get", "all", "--field-selector", "metadata.name=web"); err != nil || !strings.Contains(out, "service/web ") || strings.Contains(out, "service/api") {
		t.Errorf("get all --field-selector: %v\n%s", err, out)
	}
	if out, err := run("", "delete", "services", "--field-selector", "spec.replicas=3"); err != nil || out != "service/api deleted\n" {
		t.Errorf("delete --field-selector: %v\n%s", err, out)
	}
	for sel, says := range map[string]string{
		"spec.nodeName=n1":         "--field-selector spec.nodeName: Service: spec has no field nodeName",
		"spec.pod.containers=x":    "spec.pod.containers is a list",
		"spec=x":                   "spec is not one value: name a field in it",
		"metadata.name.first=x":    "metadata.name is one value, with no field first",
		"status.state=running,a=b": "Service: no field a",
		"a=b=c":                    "--field-selector a=b=c:",
	} {
		if _, err := run("", "get", "services", "--field-selector", sel); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("get services --field-selector %s: %v, want an error containing %q", sel, err, says)
		}
	}
	if _, err := run("", "get", "all", "--field-selector", "spec.replicas=2"); err == nil || !strings.Contains(err.Error(), "Job: spec has no field replicas") {
		t.Errorf("get all with a field a Job lacks: %v", err)
	}
}
