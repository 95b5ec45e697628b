package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// legion wait on a real node: a service until rolled out, a node until
// ready, a job until complete (exit 1 for one that failed), an object
// until deleted (exit 2 once the timeout passes first); what a kind is
// not waited for is refused before anything is waited for.
func TestWaitCommand(t *testing.T) {
	t.Parallel()
	n, _ := helloCluster(t, helloApp("w", readyHTTP)+`---
apiVersion: legion/v1
kind: Config
metadata: {name: doomed}
spec: {text: x}
`)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(stdin string, args ...string) (string, error) {
		return runLegion(t, stdin, append(flags, args...)...)
	}

	out, err := run("", "wait", "service/w", "node/"+n.Name, "--timeout", "1m")
	if err != nil || !strings.Contains(out, "service default/w: 1 of 1 tasks updated, 1 ready\n") || !strings.Contains(out, "node "+n.Name+": ready\n") {
		t.Fatalf("wait service/w node/%s: %v\n%s", n.Name, err, out)
	}
	const jobs = `apiVersion: legion/v1
kind: Job
metadata: {name: fine}
spec:
  pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never, args: [-exit, "0"]}]}
---
apiVersion: legion/v1
kind: Job
metadata: {name: broken}
spec:
  backoffLimit: 0
  pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never, args: [-exit, "3"]}]}
`
	if out, err := run(jobs, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the jobs: %v\n%s", err, out)
	}
	if out, err := run("", "wait", "job", "fine", "--for", "condition=Complete", "--timeout", "1m"); err != nil || !strings.Contains(out, "job default/fine: complete: 1 of 1 completions") {
		t.Fatalf("wait job fine: %v\n%s", err, out)
	}
	var ee *exitError
	if _, err := run("", "wait", "job/broken", "--timeout", "1m"); !errors.As(err, &ee) || ee.code != rolloutFailed || !strings.Contains(ee.msg, "job default/broken failed") {
		t.Fatalf("wait for a failing job: %v, want exit %d", err, rolloutFailed)
	}
	// Long enough for the wait's first read on a loaded machine, which
	// prints that the config is still there.
	if out, err := run("", "wait", "config/doomed", "--for", "delete", "--timeout", "2s"); !errors.As(err, &ee) || ee.code != rolloutTimedOut ||
		!strings.Contains(ee.msg, "config/doomed: not deleted within 2s") || out != "config/doomed still there\n" {
		t.Fatalf("wait --for delete of an object that stays: %v, want exit %d\n%s", err, rolloutTimedOut, out)
	}
	// The wait's output is read as it writes it, to delete the config
	// only once the wait has seen it.
	done := make(chan error, 1)
	buf := &syncBuffer{}
	waited := buf.String
	go func() {
		root := rootWith(buf, io.Discard, append(flags, "wait", "config/doomed", "--for", "delete", "--timeout", "1m")...)
		done <- execute(root)
	}()
	waitFor(t, "the wait to see the config", func() bool { return strings.Contains(waited(), "still there") })
	if out, err := run("", "delete", "config/doomed"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if err := <-done; err != nil || waited() != "config/doomed still there\nconfig/doomed deleted\n" {
		t.Fatalf("wait --for delete while it is deleted: %v\n%s", err, waited())
	}

	// kubectl's jsonpath waits, on any kind: a field equal to a value, or
	// set; one that stays otherwise until the timeout exits 2.
	if out, err := run("", "wait", "service/w", "job/fine", "--for", "jsonpath={.metadata.namespace}=default", "--timeout", "1m"); err != nil ||
		out != "service/w: {.metadata.namespace} is default\njob/fine: {.metadata.namespace} is default\n" {
		t.Fatalf("wait --for jsonpath= of two kinds: %v\n%s", err, out)
	}
	if out, err := run("", "wait", "service/w", "--for", "jsonpath={.status.vip}", "--timeout", "1m"); err != nil || !strings.HasPrefix(out, "service/w: {.status.vip} is 10.") {
		t.Fatalf("wait --for jsonpath= of a field set: %v\n%s", err, out)
	}
	if out, err := run("", "wait", "service/w", "--for", "jsonpath={.spec.replicas}=7", "--timeout", "300ms"); !errors.As(err, &ee) || ee.code != rolloutTimedOut ||
		!strings.Contains(ee.msg, "service/w: {.spec.replicas} not 7 within 300ms: 1") || out != "service/w: {.spec.replicas} is 1\n" {
		t.Fatalf("wait --for jsonpath= of a field that stays: %v, want exit %d\n%s", err, rolloutTimedOut, out)
	}

	for args, says := range map[string]string{
		"wait config/doomed":                  "a Config is waited for only to be deleted (--for delete)",
		"wait service/w --for complete":       "a Service is not waited for complete: it is waited for ready (or delete)",
		"wait service/w --for jsonpath=.x=1":  "expected {EXPRESSION}=VALUE",
		"wait service/w --for jsonpath={.x}y": `"y" after the expression`,
		"wait service/w --for ok":             "expected ready (a service or node), complete (a job), delete, or jsonpath=",
		"wait service/w job/fine --for ready": "a Job is not waited for ready: it is waited for complete",
		"wait service":                        "expected KIND NAME... or KIND/NAME...",
	} {
		if _, err := run("", strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
}
