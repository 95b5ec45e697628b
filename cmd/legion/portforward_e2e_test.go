package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// legion port-forward on a real one-node daemon: an HTTP request to the
// local port reaches the service's pod on a port nothing publishes, and
// an interrupt ends the command cleanly.
func TestPortForwardOnADaemon(t *testing.T) {
	n, ctx := helloCluster(t, helloApp("fwd", `        env: [{name: NAME, value: "reached through the forward"}]
`+readyHTTP))
	waitTaskOf(ctx, t, n, "fwd", func(tk *legion.Task) bool { return tk.Status.Ready })
	fctx, stop := context.WithCancel(ctx)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		root := rootWith(out, errOut, "port-forward", "fwd", "0:8080", "--server", n.API, "--credentials", n.Admin)
		done <- root.ExecuteContext(fctx)
	}()
	var addr string
	waitFor(t, "the forward listening", func() bool {
		line, _, _ := strings.Cut(out.String(), "\n")
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Forwarding" {
			addr = f[1]
		}
		return addr != ""
	})
	var body string
	// The node's agent opens its sessions stream as the daemon starts.
	waitFor(t, "a request through the forward", func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(body, "reached through the forward") {
		t.Fatalf("the forward answered %q (stderr %q)", body, errOut.String())
	}
	// A second forward on the port the first holds says how to pick
	// another.
	_, port, _ := net.SplitHostPort(addr)
	err := rootWith(&syncBuffer{}, &syncBuffer{}, "port-forward", "fwd", port+":8080", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "local port "+port+" is taken: give another as LOCAL:8080 (0:8080 picks a free one)") {
		t.Errorf("a forward on a taken port: %v", err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("port-forward after an interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward did not end on its context")
	}
}

func TestParsePorts(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string][2]int{"8080": {8080, 8080}, "9000:80": {9000, 80}, "0:443": {0, 443}} {
		l, r, err := parsePorts(arg)
		if err != nil || l != want[0] || r != want[1] {
			t.Errorf("parsePorts(%q) = %d, %d, %v; want %v", arg, l, r, err, want)
		}
	}
	for _, bad := range []string{"", "x", "0", "70000", "1:0", "-1:80", "a:80"} {
		if _, _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) must fail", bad)
		}
	}
}
