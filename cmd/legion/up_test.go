package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/logtest"
	"github.com/legionbsd/legion/jail/jailtest"
)

// The test binary is also the container supervisor, as legion is (main.go
// imports package shim).
func TestMain(m *testing.M) {
	jailtest.RefuseSupervisor()
	// legion up starts `legion node-resolver` from its own binary; the
	// tmux test runs `legion top` from it.
	if len(os.Args) > 1 && (os.Args[1] == "node-resolver" || os.Args[1] == "top") {
		root := newRootCommand()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	// No settings file unless a test names one: neither the user's, nor
	// contexts that legion up and init in one test would leave to others.
	os.Setenv(envConfig, noConfig)
	os.Exit(m.Run())
}

// syncBuffer is a command's output, written from its goroutines while
// the test reads it.
type syncBuffer = logtest.Buffer

// legion up examples/hello, the README's run command: the node comes up,
// loads the example's image, runs both replicas, answers on the published
// port, and removes its pods on the way out.
func TestUpRunsTheHelloExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hello, port := helloOnFreePort(t) // 8080 may be a user's cluster's
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	var out syncBuffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	ctx, cancel := context.WithCancel(context.Background())
	root.SetContext(ctx)
	root.SetArgs([]string{"up", hello, "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0", "--config", filepath.Join(dir, "config.yaml")})
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("up: %v", err)
			}
			// A stop says what it does and what stays.
			data := filepath.Join(dir, "data")
			for _, want := range []string{"Stopping: the pods stop, each within its stop grace period.\n",
				"Stopped: no pod is left. The cluster's objects stay in " + data + "; legion up --data-dir " + data + " runs them again.\n"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("up's stop did not say %q:\n%s", want, out.String())
				}
			}
		case <-time.After(60 * time.Second):
			t.Error("up did not stop")
		}
	}()
	ready := regexp.MustCompile(`service default/hello: 2 of 2 tasks ready`)
	deadline := time.Now().Add(3 * time.Minute)
	for !ready.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the example did not come up:\n%s", out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("up ended early: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The terminal shows what the user needs, first that the node is up;
	// the node's log goes to the data directory.
	if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasPrefix(first, "Legion is up: ") || strings.Contains(out.String(), "level=") {
		t.Errorf("up printed log lines (or not first that it is up):\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Pod network: ") {
		t.Errorf("up did not say which pod network the node uses:\n%s", out.String())
	}
	if log, err := os.ReadFile(filepath.Join(dir, "data", upLogName)); err != nil || !strings.Contains(string(log), "level=") {
		t.Errorf("up's log file: %v\n%s", err, log)
	}
	for _, want := range []string{"Loaded image localhost/hello:1", "service/hello created", "published at " + url,
		"Its log is " + filepath.Join(dir, "data", upLogName), "Context " + filepath.Base(filepath.Join(dir, "data")) + " added and in use"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	names := map[string]bool{}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline = time.Now().Add(30 * time.Second)
	for len(names) < 2 && time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		names[strings.TrimSpace(string(body))] = true
	}
	if len(names) != 2 {
		t.Fatalf("answers on the published port: %v, want both replicas", names)
	}
	for n := range names {
		if !strings.HasPrefix(n, "hello from hello-") {
			t.Errorf("answer %q", n)
		}
	}
	// Every other example that runs offline runs on this node too.
	m := regexp.MustCompile(`API (\S+) \(credentials (\S+)\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("up did not say its API and credentials:\n%s", out.String())
	}
	applyRunnableExamples(t, m[1], m[2])
}

// Where up says a service answers depends on the platform: the loopback
// proxies on this host, or pf, which serves pods and other hosts but not
// this host's own traffic.
func TestDescribeServicePerPlatform(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  pod:
    containers: [{name: web, image: localhost/web:1, ports: [{name: http, containerPort: 8080}]}]
  endpoint:
    ports: [{name: http, port: 80, targetPort: http, publish: ingress, publishedPort: 8080}]
`))
	if err != nil {
		t.Fatal(err)
	}
	s := objs[0].(*legion.Service)
	cur := legion.Clone(s).(*legion.Service)
	cur.Status.VIP = "10.201.0.7"
	proc := &daemon.Node{Platform: daemon.PlatformProcess, VIPOctet: 201, DNS: "127.0.0.1:5353"}
	want := "service shop/web: 2 of 2 tasks ready; VIP 10.201.0.7:80 (here 127.201.0.7:80); published at http://127.0.0.1:8080/; DNS web.shop.legion (dig @127.0.0.1 -p 5353)"
	if got := describeService(proc, s, cur, 2, 2); got != want {
		t.Errorf("process platform:\n got %s\nwant %s", got, want)
	}
	// A published port another process holds is not claimed as published.
	proc.PublishError = func(port int) error {
		if port == 8080 {
			return errors.New("listen tcp 127.0.0.1:8080: bind: address already in use")
		}
		return nil
	}
	want = "service shop/web: 2 of 2 tasks ready; VIP 10.201.0.7:80 (here 127.201.0.7:80); NOT published at 127.0.0.1:8080: listen tcp 127.0.0.1:8080: bind: address already in use; DNS web.shop.legion (dig @127.0.0.1 -p 5353)"
	if got := describeService(proc, s, cur, 2, 2); got != want {
		t.Errorf("process platform, published port held elsewhere:\n got %s\nwant %s", got, want)
	}
	netns := &daemon.Node{Platform: daemon.PlatformProcess, PodNetwork: daemon.PodNetworkNetNS, DNS: "10.200.0.1:53"}
	want = "service shop/web: 2 of 2 tasks ready; VIP 10.201.0.7:80 (here too); published at http://127.0.0.1:8080/; DNS web.shop.legion (dig @10.200.0.1 -p 53)"
	if got := describeService(netns, s, cur, 2, 2); got != want {
		t.Errorf("process platform, pod network netns:\n got %s\nwant %s", got, want)
	}
	jails := &daemon.Node{Platform: daemon.PlatformJails, ExtIf: "vtnet0", DNS: "10.200.0.1:53"}
	want = "service shop/web: 1 of 2 tasks ready; VIP 10.201.0.7:80 (from pods); published on port 8080 of vtnet0 (from other hosts); DNS web.shop.legion (dig @10.200.0.1 -p 53)"
	if got := describeService(jails, s, cur, 1, 2); got != want {
		t.Errorf("jails platform:\n got %s\nwant %s", got, want)
	}
}

// A service up could not make ready in time is shown with why, as the
// tasks say (here: its image is nowhere), not only that it is not ready.
func TestUpSaysWhyAServiceIsNotReady(t *testing.T) {
	t.Parallel()
	app := strings.Replace(helloApp("ghost", readyHTTP), "localhost/hello:1", "localhost/nothere:1", 1)
	n, ctx := helloCluster(t, app)
	objs, err := legion.ParseManifest("t.yaml", []byte(app))
	if err != nil {
		t.Fatal(err)
	}
	waitTaskOf(ctx, t, n, "ghost", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskFailed })
	var out syncBuffer
	if err := waitAndShow(ctx, &out, n, objs, time.Now(), time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"service default/ghost: 0 of 1 tasks ready",
		"  last failure: pulling localhost/nothere:1: image localhost/nothere:1: image not present", "  not all ready yet: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("up's lines lack %q:\n%s", want, out.String())
		}
	}
}

// legion up DIR reads a compose file alone when the directory has one,
// as docker compose up does (the application's own YAML beside it is not
// a manifest), the first in docker's order when it has several, and the
// image archives always; without one, every manifest.
func TestUpFilesOfADirectory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files      []string
		read, left []string
	}{
		{[]string{"d/app.oci.tar", "d/compose.yaml", "d/prometheus.yml", "d/settings.json"},
			[]string{"d/app.oci.tar", "d/compose.yaml"}, []string{"prometheus.yml", "settings.json"}},
		{[]string{"d/docker-compose.yml", "d/compose.yaml"}, []string{"d/compose.yaml"}, []string{"docker-compose.yml"}},
		{[]string{"d/docker-compose.yml", "d/notes.txt"}, []string{"d/docker-compose.yml"}, nil},
		{[]string{"d/app.oci.tar", "d/db.yaml", "d/web.yml", "d/README.md"}, []string{"d/app.oci.tar", "d/db.yaml", "d/web.yml"}, nil},
	} {
		read, left := upFiles(tc.files)
		if !slices.Equal(read, tc.read) || !slices.Equal(left, tc.left) {
			t.Errorf("%v: read %v, left %v; want %v, %v", tc.files, read, left, tc.read, tc.left)
		}
	}
}
