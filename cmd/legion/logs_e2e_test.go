package main

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// A job's finished task on a real one-node daemon: legion logs prints its
// output, by the job's name and by the task's, once its pod is gone.
func TestLogsOfAFinishedJobOnADaemon(t *testing.T) {
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Job
metadata: {name: greet}
spec:
  pod:
    containers:
      - name: greet
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "hello from the job", -say, "second line", -err, "a warning", -exit, "0"]
`)
	task := waitTaskOf(ctx, t, n, "greet", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskComplete }).Metadata.Name
	for _, arg := range []string{"greet", "task/" + task} {
		var out, errOut *syncBuffer
		var err error
		// The node's agent opens its sessions stream as the daemon starts;
		// until then the manager says it is not connected.
		waitFor(t, "legion logs to reach the node's agent", func() bool {
			out, errOut = &syncBuffer{}, &syncBuffer{}
			root := rootWith(out, errOut, "logs", arg, "--server", n.API, "--credentials", n.Admin)
			err = root.ExecuteContext(ctx)
			return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
		})
		if err != nil {
			t.Fatalf("legion logs %s: %v", arg, err)
		}
		if got, want := out.String(), "hello from the job\nsecond line\n"; got != want {
			t.Errorf("legion logs %s: stdout %q, want %q", arg, got, want)
		}
		if got, want := errOut.String(), "a warning\n"; got != want {
			t.Errorf("legion logs %s: stderr %q, want %q", arg, got, want)
		}
	}
}
