package main

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// A session opened on a real daemon (legion logs) is an audit event
// naming the task it reached, once its first frame went out.
func TestAuditRecordsASessionOpened(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Job
metadata: {name: said}
spec:
  pod:
    containers:
      - name: said
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "audited", -exit, "0"]
`)
	task := waitTaskOf(ctx, t, n, "said", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskComplete }).Metadata.Name
	var err error
	waitFor(t, "legion logs to reach the node's agent", func() bool {
		out := &syncBuffer{}
		err = rootWith(out, out, "logs", "said", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
		return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
	})
	if err != nil {
		t.Fatalf("legion logs said: %v", err)
	}
	cl, err := client.New(client.Options{Server: n.API, CredentialsFile: n.Admin})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var events []client.AuditEvent
	testcluster.WaitFor(t, "the logs session in the audit", 10*time.Second, func() bool {
		events, err = cl.Audit(ctx, client.AuditFilter{Action: "logs"})
		for _, e := range events {
			if e.Outcome == "ok" {
				return true
			}
		}
		return false
	})
	var opened []client.AuditEvent
	for _, e := range events {
		if e.Outcome == "ok" {
			opened = append(opened, e)
		}
	}
	if len(opened) != 1 || opened[0].Kind != "Task" || opened[0].Namespace != "default" || opened[0].Name != task || opened[0].Role != "admin" {
		t.Fatalf("opened sessions %+v, want one of Task default/%s by the admin", opened, task)
	}
}
