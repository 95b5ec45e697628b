package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// legion port-forward on a real one-node daemon: an HTTP request to the
// local port reaches the service's pod on a port nothing publishes, and
// an interrupt ends the command cleanly.
func TestPortForwardOnADaemon(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("fwd", `        env: [{name: NAME, value: "reached through the forward"}]
`+readyHTTP+`  endpoint: {ports: [{name: web, port: 80, targetPort: http}]}
`))
	waitTaskOf(ctx, t, n, "fwd", func(tk *legion.Task) bool { return tk.Status.Ready })
	fctx, stop := context.WithCancel(ctx)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		// The service's port 80, as kubectl's svc/NAME: its target port.
		root := rootWith(out, errOut, "port-forward", "service/fwd", "0:80", "--server", n.API, "--credentials", n.Admin)
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
	if line, _, _ := strings.Cut(out.String(), "\n"); !strings.HasSuffix(line, " to port 8080 of service/fwd (the service's port 80, web)") {
		t.Errorf("port-forward said %q, want where port 80 went", line)
	}
	// A second forward on the port the first holds says how to pick
	// another.
	_, port, _ := net.SplitHostPort(addr)
	err := rootWith(&syncBuffer{}, &syncBuffer{}, "port-forward", "fwd", port+":http", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "local port "+port+" is taken: give another as LOCAL:http (0:http picks a free one)") {
		t.Errorf("a forward on a taken port: %v", err)
	}
	// Nothing of the name: refused, not listened for.
	err = rootWith(&syncBuffer{}, &syncBuffer{}, "port-forward", "nothere", "0:80", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "no task, service, job or stateful ordinal nothere in namespace default") {
		t.Errorf("a forward to nothing: %v", err)
	}
	// A name no port has is refused, naming those there are.
	err = rootWith(&syncBuffer{}, &syncBuffer{}, "port-forward", "fwd", "0:admin", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), `no container port of fwd's pod is named "admin" (it names http, web)`) {
		t.Errorf("a forward to a port no one names: %v", err)
	}
	// A user who may read the service but not forward to it is refused
	// before anything listens.
	viewer := filepath.Join(t.TempDir(), "viewer.pem")
	if out, err := runLegion(t, "", "user", "create", "viewer", "--role", "view", "-n", "default", "-o", viewer, "--server", n.API, "--credentials", n.Admin); err != nil {
		t.Fatalf("user create: %v\n%s", err, out)
	}
	vout := &syncBuffer{}
	err = rootWith(vout, &syncBuffer{}, "port-forward", "fwd", "0:http", "--server", n.API, "--credentials", viewer).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "viewer is view in namespace default; to use port-forward it needs edit") || strings.Contains(vout.String(), "Forwarding") {
		t.Errorf("a viewer's forward: %v\n%s", err, vout.String())
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
	for arg, want := range map[string]struct {
		local int
		ref   legion.PortRef
	}{
		"8080": {-1, legion.PortRef{Number: 8080}}, "9000:80": {9000, legion.PortRef{Number: 80}},
		"0:443": {0, legion.PortRef{Number: 443}}, "http": {-1, legion.PortRef{Name: "http"}}, "0:web": {0, legion.PortRef{Name: "web"}},
		":8080": {0, legion.PortRef{Number: 8080}}, ":web": {0, legion.PortRef{Name: "web"}}, // kubectl's: a free local port
	} {
		l, r, err := parsePorts(arg)
		if err != nil || l != want.local || r != want.ref {
			t.Errorf("parsePorts(%q) = %d, %v, %v; want %v", arg, l, r, err, want)
		}
	}
	for _, bad := range []string{"", "0", "70000", "1:0", "-1:80", "a:80", "80:", "-x"} {
		if _, _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) must fail", bad)
		}
	}
}

// A service's own port goes to its target port, as kubectl's
// svc/NAME does; a name is a container port's; another number is the
// pod's port as given.
func TestForwardPort(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t.yaml", []byte(helloApp("web", readyHTTP+`      - name: admin
        image: localhost/hello:1
        ports: [{name: admin, containerPort: 9000}]
  endpoint: {ports: [{name: web, port: 80, targetPort: http}, {port: 81, targetPort: 9999}]}
`)))
	if err != nil {
		t.Fatal(err)
	}
	svc := objs[0].(*legion.Service)
	task := &legion.Task{Spec: legion.TaskSpec{Pod: svc.Spec.Pod}}
	task.Metadata.Name = "web-1-1"
	for _, c := range []struct {
		obj       legion.Object
		ref       legion.PortRef
		port      int
		via, fail string
	}{
		{obj: svc, ref: legion.PortRef{Number: 80}, port: 8080, via: " (the service's port 80, web)"},
		{obj: svc, ref: legion.PortRef{Name: "web"}, port: 8080, via: " (the service's port 80, web)"},
		{obj: svc, ref: legion.PortRef{Number: 81}, port: 9999, via: " (the service's port 81)"},
		{obj: svc, ref: legion.PortRef{Number: 8080}, port: 8080},
		{obj: svc, ref: legion.PortRef{Name: "admin"}, port: 9000, via: " (admin)"},
		{obj: svc, ref: legion.PortRef{Name: "db"}, fail: `no container port of web's pod is named "db" (it names admin, http, web)`},
		{obj: task, ref: legion.PortRef{Number: 80}, port: 80},
		{obj: task, ref: legion.PortRef{Name: "http"}, port: 8080, via: " (http)"},
		{obj: task, ref: legion.PortRef{Name: "web"}, fail: `no container port of web-1-1's pod is named "web" (it names admin, http)`},
	} {
		port, via, err := forwardPort(c.obj, c.ref)
		if c.fail != "" {
			if err == nil || !strings.Contains(err.Error(), c.fail) {
				t.Errorf("%s %s: %d, %v; want the error %q", c.obj.GetKind(), c.ref, port, err, c.fail)
			}
			continue
		}
		if err != nil || port != c.port || via != c.via {
			t.Errorf("%s %s: %d %q %v; want %d %q", c.obj.GetKind(), c.ref, port, via, err, c.port, c.via)
		}
	}
}
