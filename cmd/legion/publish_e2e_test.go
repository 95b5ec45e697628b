package main

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// A published port another process of the host holds: the node reports
// it, describe and a completed rollout say so, events tell of it, and once
// the port is free and the endpoints change, the node serves it and says
// so. Before, the rollout said ready and the port answered with whatever
// held it, the reason only in the node's log.
func TestAPublishedPortHeldElsewhereIsReported(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	port := held.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	n, ctx := helloCluster(t, helloApp("web", readyHTTP+
		"  endpoint: {ports: [{name: http, port: 80, targetPort: http, publish: ingress, publishedPort: "+p+"}]}\n"))
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	nodeErrors := func() []legion.PortError {
		o, err := n.Client.Get(ctx, legion.KindNode, "", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Node).Status.PublishErrors
	}
	waitFor(t, "the node to report the port it cannot serve", func() bool {
		errs := nodeErrors()
		return len(errs) == 1 && errs[0].Port == port && strings.Contains(errs[0].Error, "address already in use")
	})
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })

	out, err := runLegion(t, "", append([]string{"rollout", "status", "web", "--timeout", "60s"}, flags...)...)
	if want := "warning: service default/web: published port " + p + " is not served on node " + n.Name + ": "; err != nil || !strings.Contains(out, want) {
		t.Errorf("rollout status of a service whose published port is held elsewhere: %v, want %q in\n%s", err, want, out)
	}
	// The table shows the port asked for; the warning after it says it
	// is not served.
	out, err = runLegion(t, "", append([]string{"get", "services"}, flags...)...)
	if want := "warning: service default/web: published port " + p + " is not served on node " + n.Name + ": listen tcp"; err != nil || !strings.Contains(out, want) {
		t.Errorf("get services: %v, want %q in\n%s", err, want, out)
	}
	out, err = runLegion(t, "", append([]string{"describe", "service", "web"}, flags...)...)
	if want := "port " + p + " on node " + n.Name + ": listen tcp 127.0.0.1:" + p; err != nil || !strings.Contains(out, "Not published:") || !strings.Contains(out, want) {
		t.Errorf("describe service web: %v, want %q in\n%s", err, want, out)
	}
	// Events are derived from the node's change as it is watched: asked
	// until they tell of it.
	nodeEvents := func(want string) bool {
		out, err := runLegion(t, "", append([]string{"events", "--kind", "node"}, flags...)...)
		return err == nil && strings.Contains(out, want)
	}
	waitFor(t, "the node's PortNotPublished event", func() bool {
		return nodeEvents("PortNotPublished") && nodeEvents("published port "+p+" not served here")
	})

	// Freed, the port is served at the next change of the endpoints (a
	// second replica here; without one, within daemon.UnservedRetry), and
	// the node says so.
	held.Close()
	if out, err := runLegion(t, "", append([]string{"scale", "web", "2"}, flags...)...); err != nil {
		t.Fatalf("scale web 2: %v\n%s", err, out)
	}
	waitFor(t, "the node to serve the freed port", func() bool { return nodeErrors() == nil })
	if out, err := runLegion(t, "", append([]string{"get", "services"}, flags...)...); err != nil || strings.Contains(out, "warning:") {
		t.Errorf("get services once the port is served: %v, want no warning in\n%s", err, out)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+p); err != nil {
		t.Errorf("the freed published port is not served: %v", err)
	} else {
		c.Close()
	}
	waitFor(t, "the node's PortPublished event", func() bool { return nodeEvents("published port " + p + " served again") })
}

// A rollout that times out says so of a published port held elsewhere
// too, not only one that completes: here its image is missing, so it
// never would.
func TestATimedOutRolloutSaysOfAPortHeldElsewhere(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	p := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
	app := strings.Replace(helloApp("web", readyHTTP+
		"  endpoint: {ports: [{name: http, port: 80, targetPort: http, publish: ingress, publishedPort: "+p+"}]}\n"),
		"localhost/hello:1", "localhost/nothere:1", 1)
	n, ctx := helloCluster(t, app)
	waitFor(t, "the node to report the port it cannot serve", func() bool {
		o, err := n.Client.Get(ctx, legion.KindNode, "", n.Name)
		return err == nil && len(o.(*legion.Node).Status.PublishErrors) == 1
	})
	out, err := runLegion(t, "", "rollout", "status", "web", "--timeout", "2s", "--server", n.API, "--credentials", n.Admin)
	var ee *exitError
	if want := "warning: service default/web: published port " + p + " is not served on node " + n.Name + ": "; !errors.As(err, &ee) ||
		ee.code != rolloutTimedOut || !strings.Contains(out, want) {
		t.Errorf("rollout status that times out: %v, want exit %d and %q in\n%s", err, rolloutTimedOut, want, out)
	}
}
