package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// legion node drain --wait on a one-node cluster: a stateless service's
// task stops and the drain completes (exit 0); a stateful ordinal whose
// volume no node can take holds the drain, so --timeout ends it with exit
// 2 naming what is left, and activating the node cancels a waiting drain
// (exit 1).
func TestNodeDrainWait(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("web", readyHTTP))
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })
	out, err := runLegion(t, "", append([]string{"node", "drain", n.Name, "--wait", "--timeout", "60s"}, flags...)...)
	if err != nil || !strings.Contains(out, "drain completed") {
		t.Fatalf("drain --wait of a stateless node: %v\n%s", err, out)
	}
	// The one node drained, web's task has nowhere to go: said, though the
	// drain completed.
	if !strings.Contains(out, "warning: what ran on node "+n.Name+" has nowhere to run: default/web-1-2 pending (no node can run it") {
		t.Errorf("drain --wait leaving web's task nowhere to run said nothing of it:\n%s", out)
	}
	if _, err := runLegion(t, "", append([]string{"node", "activate", n.Name}, flags...)...); err != nil {
		t.Fatal(err)
	}
	// Without --wait, a drain that leaves the tasks no other node says so
	// at once.
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })
	out, err = runLegion(t, "", append([]string{"node", "drain", n.Name}, flags...)...)
	if err != nil || !strings.Contains(out, "warning: no other node is ready and active, so node "+n.Name+"'s 1 task (of service default/web) will wait pending until one is") {
		t.Errorf("drain of the only node: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", append([]string{"node", "activate", n.Name}, flags...)...); err != nil {
		t.Fatal(err)
	}
	deployHello(ctx, t, n, strings.Replace(helloApp("db", readyHTTP), "spec:\n", "spec:\n  mode: stateful\n  replicas: 1\n", 1)+
		`        volumeMounts: [{name: data, path: /data}]
    volumes: [{name: data, claim: {size: 16Mi}}]
`)
	waitTaskOf(ctx, t, n, "db", func(tk *legion.Task) bool { return tk.Status.Ready })
	out, err = runLegion(t, "", append([]string{"node", "drain", n.Name, "--wait", "--timeout", "2s", "-o", "json"}, flags...)...)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != drainTimedOut || !strings.Contains(ee.msg, "volume default/data-db-0") {
		t.Fatalf("drain --wait held by a volume: %v, want exit %d naming the volume\n%s", err, drainTimedOut, out)
	}
	var last legion.DrainStatus
	if err := json.Unmarshal([]byte(out), &last); err != nil || last.State == legion.DrainCompleted || len(last.Remaining) == 0 {
		t.Fatalf("-o json: %v %+v\n%s", err, last, out)
	}
	// The timed-out drain left the node draining: activate it, so the
	// next drain's own write is seen below.
	if _, err := runLegion(t, "", append([]string{"node", "activate", n.Name}, flags...)...); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := runLegion(t, "", append([]string{"node", "drain", n.Name, "--wait"}, flags...)...)
		done <- err
	}()
	// Activate once the waiting command has set the node draining.
	waitFor(t, "the node draining again", func() bool {
		o, err := n.Client.Get(ctx, legion.KindNode, "", n.Name)
		return err == nil && o.(*legion.Node).Spec.Availability == legion.AvailabilityDrain
	})
	if _, err := runLegion(t, "", append([]string{"node", "activate", n.Name}, flags...)...); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.As(err, &ee) || ee.code != drainCancelled {
			t.Fatalf("a drain cancelled while waited on: %v, want exit %d", err, drainCancelled)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("drain --wait did not end when the node was activated")
	}
	for _, bad := range [][]string{{"--timeout", "5s"}, {"--wait", "-o", "yaml"}} {
		if _, err := runLegion(t, "", append(append([]string{"node", "drain", n.Name}, bad...), flags...)...); err == nil {
			t.Errorf("drain %v accepted", bad)
		}
	}
}

// Only tasks of what ran on the drained node, left pending with the
// planner's reason, are said to have nowhere to run.
func TestStranded(t *testing.T) {
	t.Parallel()
	task := func(ns, name, owner, node string, desired, state legion.TaskState, msg string) legion.Object {
		o, _ := legion.New(legion.KindTask)
		tk := o.(*legion.Task)
		tk.Metadata.Namespace, tk.Metadata.Name = ns, name
		tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: owner}
		tk.Spec.Node, tk.Spec.DesiredState = node, desired
		tk.Status.State, tk.Status.Message = state, msg
		return tk
	}
	const why = "no node can run it: 1 node is draining"
	tasks := []legion.Object{
		task("shop", "web-1-1", "web", "n1", legion.TaskShutdown, legion.TaskShutdown, "stopped"),
		task("shop", "web-1-2", "web", "", legion.TaskRunning, legion.TaskPending, why),
		task("shop", "web-2-2", "web", "", legion.TaskRunning, legion.TaskPending, ""), // being placed
		task("shop", "api-1-1", "api", "n1", legion.TaskShutdown, legion.TaskShutdown, "stopped"),
		task("shop", "api-1-2", "api", "n2", legion.TaskRunning, legion.TaskRunning, ""),    // placed elsewhere
		task("shop", "other-1-1", "other", "", legion.TaskRunning, legion.TaskPending, why), // never on n1
	}
	if got, want := stranded("n1", tasks), "what ran on node n1 has nowhere to run: shop/web-1-2 pending ("+why+")"; got != want {
		t.Errorf("stranded:\n got %q\nwant %q", got, want)
	}
	if got := stranded("n2", tasks); got != "" {
		t.Errorf("a node whose tasks found a place: %q", got)
	}
	many := []legion.Object{task("a", "db-1-1", "db", "n1", legion.TaskShutdown, legion.TaskShutdown, "")}
	for i := range 7 {
		many = append(many, task("a", fmt.Sprintf("db-%d-2", i), "db", "", legion.TaskRunning, legion.TaskPending, why))
	}
	if got := stranded("n1", many); !strings.HasSuffix(got, "a/db-0-2, a/db-1-2, a/db-2-2, a/db-3-2, a/db-4-2 and 2 more pending ("+why+")") {
		t.Errorf("seven waiting: %q", got)
	}
}

// kubectl drain's flags: --ignore-daemonsets asks for what a drain here
// does not do, and is refused before any manager is reached; the flags
// that consent to what it does anyway are noted, and the drain goes on.
func TestDrainTakesKubectlFlags(t *testing.T) {
	t.Parallel()
	unreachable := []string{"--server", "127.0.0.1:1", "--request-timeout", "100ms"}
	_, err := runLegion(t, "", append([]string{"node", "drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data"}, unreachable...)...)
	if err == nil || !strings.Contains(err.Error(), "--ignore-daemonsets: a drain here stops the tasks of global services too") {
		t.Errorf("drain --ignore-daemonsets: %v", err)
	}
	out, err := runLegion(t, "", append([]string{"node", "drain", "n1", "--delete-emptydir-data", "--force"}, unreachable...)...)
	if err == nil || !strings.Contains(out, "note: --delete-emptydir-data: a drain here always stops tasks whose tmpfs volumes' data goes with them") ||
		!strings.Contains(out, "note: --force: every task has a service or job") {
		t.Errorf("drain --delete-emptydir-data --force: %v\n%s", err, out)
	}
}
