package main

import (
	"encoding/json"
	"errors"
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
