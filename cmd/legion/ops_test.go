package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/testpoll"
)

// startCluster runs a one-node cluster in the test and returns it once it
// serves.
func startCluster(t *testing.T, opts ...func(*daemon.Options)) *daemon.Node {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *daemon.Node, 1)
	done := make(chan error, 1)
	o := daemon.Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run"),
		Listen: "127.0.0.1:0", DNSListen: "127.0.0.1:0", Upstreams: []string{}, RemovePods: true}
	for _, f := range opts {
		f(&o)
	}
	go func() {
		done <- daemon.Run(ctx, o, func(n *daemon.Node) error { ready <- n; return nil })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	select {
	case n := <-ready:
		return n
	case err := <-done:
		t.Fatalf("the node did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the node did not start in 60 s")
	}
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, 60*time.Second, 50*time.Millisecond, cond)
}

func TestScaleRollbackNodeAndTasksCommands(t *testing.T) {
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	legionCmd := func(args ...string) string {
		t.Helper()
		out, err := runLegion(t, "", append(args, flags...)...)
		if err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	svc := func(value string) legion.Object {
		objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 2
  pod: {containers: [{name: c, image: localhost/none:1, pullPolicy: never, env: [{name: V, value: `+value+`}]}]}
`))
		if err != nil {
			t.Fatal(err)
		}
		return objs[0]
	}
	if _, err := n.Client.Apply(ctx, []legion.Object{svc("one")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *legion.Service {
		o, err := n.Client.Get(ctx, legion.KindService, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service)
	}

	waitFor(t, "the planner to see the service", func() bool { return get().Status.Spec != nil })
	if out := legionCmd("scale", "web", "4"); !strings.Contains(out, "scaled to 4") || *get().Spec.Replicas != 4 {
		t.Fatalf("scale: %q, replicas %d", out, *get().Spec.Replicas)
	}
	if _, err := runLegion(t, "", append([]string{"scale", "web", "-1"}, flags...)...); err == nil {
		t.Fatal("scale to -1 succeeded")
	}
	// Docker's form; a service that is not there is said and does not keep
	// the other from being scaled.
	out, err := runLegion(t, "", append([]string{"scale", "nope=1", "web=5"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(out, "service/web scaled to 5") || *get().Spec.Replicas != 5 {
		t.Fatalf("scale nope=1 web=5: %v\n%s\nreplicas %d", err, out, *get().Spec.Replicas)
	}
	// kubectl's form.
	if out := legionCmd("scale", "service/web", "--replicas", "3"); !strings.Contains(out, "service/web scaled to 3") || *get().Spec.Replicas != 3 {
		t.Fatalf("scale service/web --replicas 3: %q, replicas %d", out, *get().Spec.Replicas)
	}
	if out := legionCmd("scale", "web=4"); !strings.Contains(out, "scaled to 4") || *get().Spec.Replicas != 4 {
		t.Fatalf("scale web=4: %q, replicas %d", out, *get().Spec.Replicas)
	}
	// kubectl's precondition: scaled only from the count named.
	if _, err := runLegion(t, "", append([]string{"scale", "web", "--replicas", "6", "--current-replicas", "3"}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "service web wants 4 replicas, not 3 (--current-replicas): not scaled") || *get().Spec.Replicas != 4 {
		t.Fatalf("scale --current-replicas 3 of a service of 4: %v, replicas %d", err, *get().Spec.Replicas)
	}
	if out := legionCmd("scale", "web", "--replicas", "2", "--current-replicas", "4"); !strings.Contains(out, "scaled to 2") || *get().Spec.Replicas != 2 {
		t.Fatalf("scale --current-replicas 4: %q, replicas %d", out, *get().Spec.Replicas)
	}
	// kubectl's -l and --all: the services selected, to --replicas.
	if out := legionCmd("scale", "services", "-l", "app!=x", "--replicas", "3"); out != "service/web scaled to 3\n" || *get().Spec.Replicas != 3 {
		t.Fatalf("scale services -l: %q, replicas %d", out, *get().Spec.Replicas)
	}
	if out := legionCmd("scale", "--all", "--replicas", "2"); out != "service/web scaled to 2\n" || *get().Spec.Replicas != 2 {
		t.Fatalf("scale --all: %q, replicas %d", out, *get().Spec.Replicas)
	}
	for args, says := range map[string]string{
		"scale -l app=x --replicas 1":      "no replicated or stateful services with app=x in namespace default",
		"scale -l app!=x":                  "-l and --all scale to --replicas N: give it",
		"scale web -l app!=x --replicas 1": "web: -l and --all scale services: give the kind service, or nothing",
		"scale --all -l a=b --replicas 1":  "-l and --all: give one",
		"scale":                            "expected SERVICE REPLICAS",
	} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if out := legionCmd("scale", "web=4"); !strings.Contains(out, "scaled to 4") {
		t.Fatalf("scale web=4 again: %q", out)
	}
	// kubectl's name for it.
	if _, err := runLegion(t, "", append([]string{"rollout", "undo", "web"}, flags...)...); err == nil || !strings.Contains(err.Error(), "service web has no earlier spec to go back to") {
		t.Fatalf("rollout undo with no earlier spec: %v", err)
	}
	// An update of the pod records the spec stored before it, the scale
	// included even when the planner has not seen the scale yet (no wait
	// here); rollback puts it back.
	if _, err := n.Client.Apply(ctx, []legion.Object{svc("two")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the update recorded", func() bool {
		u := get().Status.Update
		return u != nil && u.PreviousSpec != nil
	})
	legionCmd("rollback", "svc/web")
	if s := get().Spec; s.Pod.Containers[0].Env[0].Value != "one" || *s.Replicas != 4 {
		t.Fatalf("after rollback the pod has V=%s and %d replicas, want one and 4", s.Pod.Containers[0].Env[0].Value, *s.Replicas)
	}

	out = legionCmd("node", "ls")
	if !strings.Contains(out, n.Name) || !strings.Contains(out, "active") {
		t.Fatalf("node ls:\n%s", out)
	}
	legionCmd("node", "drain", n.Name)
	o, err := n.Client.Get(ctx, legion.KindNode, "", n.Name)
	if err != nil || o.(*legion.Node).Spec.Availability != legion.AvailabilityDrain {
		t.Fatalf("after drain: %+v %v", o, err)
	}
	if out := legionCmd("node", "activate", n.Name); out != "node/"+n.Name+" activated\n" {
		t.Fatalf("node activate said %q", out)
	}
	// Docker's node rm: a node still heard from is refused, and kept.
	if out, err := runLegion(t, "", append([]string{"node", "rm", n.Name}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "node "+n.Name+" is ready: removing it starts its tasks elsewhere at once") {
		t.Fatalf("node rm of a ready node: %v\n%s", err, out)
	}
	if _, err := n.Client.Get(ctx, legion.KindNode, "", n.Name); err != nil {
		t.Fatalf("the node after a refused rm: %v", err)
	}
	waitFor(t, "tasks listed", func() bool {
		out := legionCmd("tasks", "web")
		return strings.Contains(out, "web-1-") && strings.Contains(out, "NODE")
	})
	if out := legionCmd("tasks", "service/web", "-o", "name"); !strings.Contains(out, "task/web-1-") {
		t.Errorf("tasks service/web: %q", out)
	}
	if out, err := runLegion(t, "", append([]string{"tasks", "job/web"}, flags...)...); err != nil || out != "No tasks found.\n" {
		t.Errorf("tasks job/web, of a service web: %v %q", err, out)
	}

	// The same -o on tasks, node ls and get, against the daemon.
	if out := legionCmd("node", "ls", "-o", "name"); out != "node/"+n.Name+"\n" {
		t.Errorf("node ls -o name: %q", out)
	}
	if out := legionCmd("node", "ls", "-o", "jsonpath={[0].status.addr}"); out == "" || !strings.Contains(n.API, strings.Split(out, ":")[0]) {
		t.Errorf("node ls -o jsonpath: %q (API %s)", out, n.API)
	}
	if out := legionCmd("node", "ls", "-o", "wide"); !strings.Contains(out, "MANAGER STATUS") || !strings.Contains(out, "PLATFORM") || !strings.Contains(out, "Leader") {
		t.Errorf("node ls -o wide:\n%s", out)
	}
	owners := legionCmd("tasks", "web", "-o", `go-template={{range .}}{{.spec.owner.name}}{{"\n"}}{{end}}`)
	if lines := strings.Fields(owners); len(lines) < 4 || slices.ContainsFunc(lines, func(s string) bool { return s != "web" }) {
		t.Errorf("tasks -o go-template: %q", owners)
	}
	if out := legionCmd("tasks", "web", "-o", "wide"); !strings.Contains(out, "IMAGE") || !strings.Contains(out, "localhost/none:1") {
		t.Errorf("tasks -o wide:\n%s", out)
	}
	if out := legionCmd("get", "service", "web", "-o", "jsonpath={.spec.replicas}"); out != "4" {
		t.Errorf("get service web -o jsonpath: %q", out)
	}
	if _, err := runLegion(t, "", append([]string{"tasks", "-o", "xml"}, flags...)...); err == nil || !strings.Contains(err.Error(), "jsonpath=") {
		t.Errorf("tasks -o xml: %v", err)
	}
}

// deployHello loads the example's image into the node and applies the
// manifest, which may use localhost/hello:1.
func deployHello(ctx context.Context, t *testing.T, n *daemon.Node, manifest string) {
	t.Helper()
	loadHello(ctx, t, n)
	objs, err := legion.ParseManifest("test.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// loadHello loads the hello example's image, localhost/hello:1, on n.
func loadHello(ctx context.Context, t *testing.T, n *daemon.Node) {
	t.Helper()
	f, err := os.Open("../../examples/hello/hello.oci.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := n.Images.Load(ctx, f, "localhost/hello:1", time.Now()); err != nil {
		t.Fatalf("loading the example's image: %v", err)
	}
}

// helloCluster starts a one-node cluster and deploys manifest on it (see
// deployHello); the context it returns ends after two minutes or with the
// test.
func helloCluster(t *testing.T, manifest string, opts ...func(*daemon.Options)) (*daemon.Node, context.Context) {
	t.Helper()
	n := startCluster(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	deployHello(ctx, t, n, manifest)
	return n, ctx
}

// helloApp is a manifest of a Service named name whose one container,
// app, runs the hello example's server on the pod's address at 8080; more
// is appended as it is (further container lines, then the rest).
func helloApp(name, more string) string {
	return `apiVersion: legion/v1
kind: Service
metadata: {name: ` + name + `}
spec:
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-listen, "$(LEGION_POD_IP):8080"]
` + more
}

// readyHTTP are container lines of helloApp naming port 8080 http and
// probing the server's readiness on it.
const readyHTTP = `        ports: [{name: http, containerPort: 8080}]
        probes:
          readiness: {http: {path: /ready, port: http}, period: 100ms}
`

// waitTaskOf waits for a task of owner (a service or job of the default
// namespace) that ok accepts, and returns it.
func waitTaskOf(ctx context.Context, t *testing.T, n *daemon.Node, owner string, ok func(*legion.Task) bool) *legion.Task {
	t.Helper()
	var found *legion.Task
	waitFor(t, "a task of "+owner, func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range tasks {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == owner && ok(tk) {
				found = tk
				return true
			}
		}
		return false
	})
	return found
}

// waitReadyTasks waits until owner has count tasks running and ready in
// the default namespace, and returns their names.
func waitReadyTasks(ctx context.Context, t *testing.T, n *daemon.Node, owner string, count int) []string {
	t.Helper()
	var names []string
	waitFor(t, fmt.Sprintf("%d ready tasks of %s", count, owner), func() bool {
		names = names[:0]
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range tasks {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == owner && tk.Status.State == legion.TaskRunning && tk.Status.Ready {
				names = append(names, tk.Metadata.Name)
			}
		}
		return len(names) == count
	})
	return names
}

func TestScaleArgs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		replicas *int // --replicas
		want     []aScale
		err      string
	}{
		{args: []string{"web", "3"}, want: []aScale{{"web", 3}}},
		{args: []string{"web=3"}, want: []aScale{{"web", 3}}},
		{args: []string{"web=3", "api=0"}, want: []aScale{{"web", 3}, {"api", 0}}},
		{args: []string{"service/web", "3"}, want: []aScale{{"web", 3}}},
		{args: []string{"svc/web=3", "api=1"}, want: []aScale{{"web", 3}, {"api", 1}}},
		{args: []string{"service/web"}, replicas: new(3), want: []aScale{{"web", 3}}},
		{args: []string{"web", "svc/api"}, replicas: new(0), want: []aScale{{"web", 0}, {"api", 0}}},
		{args: []string{"web"}, err: `"web": expected SERVICE=REPLICAS (or the two words SERVICE REPLICAS, or SERVICE --replicas N)`},
		{args: []string{"web", "x"}, err: `replicas "x" of web: expected a whole number from 0 to`},
		{args: []string{"web=3", "api=-1"}, err: `replicas "-1" of api: expected a whole number`},
		{args: []string{"=3"}, err: `"=3": expected SERVICE=REPLICAS`},
		{args: []string{"web=3", "web=4"}, err: "service web is given twice"},
		{args: []string{"web=3", "service/web=4"}, err: "service web is given twice"},
		{args: []string{"web", "3", "api"}, err: `"web": expected SERVICE=REPLICAS`},
		{args: []string{"web=3"}, replicas: new(2), err: `"web=3": --replicas gives the count; name the services alone`},
		{args: []string{"web", "web"}, replicas: new(2), err: "service web is given twice"},
		{args: []string{"job/web", "3"}, err: "job/web: expected a service (NAME or service/NAME), not a Job"},
		{args: []string{"pods/web=3"}, err: `pods/web: unknown kind "pods"`},
		// kubectl's kind as a word of its own names no service.
		{args: []string{"service", "web", "api"}, replicas: new(2), want: []aScale{{"web", 2}, {"api", 2}}},
		{args: []string{"svc", "web"}, replicas: new(1), want: []aScale{{"web", 1}}},
		{args: []string{"deployment", "web"}, replicas: new(2), err: "deployment/web: a Deployment is a Service here: service/web"},
		{args: []string{"sts", "db"}, replicas: new(2), err: "a StatefulSet is a Service of mode stateful here"},
		{args: []string{"service"}, replicas: new(2), want: []aScale{{"service", 2}}}, // alone, a name
		{args: []string{"config", "web"}, replicas: new(2), want: []aScale{{"config", 2}, {"web", 2}}},
	} {
		replicas := -1 // not given
		if tc.replicas != nil {
			replicas = *tc.replicas
		}
		got, err := scaleArgs(tc.args, replicas)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("scaleArgs(%q, %d): %v, want an error containing %q", tc.args, replicas, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("scaleArgs(%q, %d) = %v, %v; want %v", tc.args, replicas, got, err, tc.want)
		}
	}
}

func TestMayRemoveNode(t *testing.T) {
	t.Parallel()
	node := func(state legion.NodeState) *legion.Node {
		n := &legion.Node{Header: legion.Header{Metadata: legion.Metadata{Name: "w1"}}}
		n.Status.State = state
		return n
	}
	for _, tc := range []struct {
		state legion.NodeState
		force bool
		ok    bool
	}{
		{legion.NodeDown, false, true},
		{legion.NodeReady, false, false},
		{legion.NodeSuspect, false, false},
		{legion.NodeReady, true, true},
	} {
		if err := mayRemoveNode(node(tc.state), tc.force); (err == nil) != tc.ok {
			t.Errorf("%s, force %v: %v, want allowed %v", tc.state, tc.force, err, tc.ok)
		}
	}
}

// The commands of one service (rollout status|restart|undo|history,
// rollback, autoscale) take it as NAME, service/NAME or kubectl's two
// words; a Kubernetes kind is refused naming what it is here.
func TestOneServiceArg(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"web":            "web",
		"service/web":    "web",
		"svc web":        "web",
		"services web":   "web",
		"deployment web": "error: deployment/web: a Deployment is a Service here: service/web",
		"deploy/web":     "error: a Deployment is a Service here",
		"web api":        "error: web api: expected one service (NAME, service/NAME or service NAME)",
		"job/web":        "error: expected a service (NAME or service/NAME), not a Job",
	} {
		var got string
		if name, err := oneServiceArg(strings.Fields(args)); err != nil {
			got = "error: " + err.Error()
		} else {
			got = name
		}
		if got != want && !(strings.HasPrefix(want, "error: ") && strings.Contains(got, strings.TrimPrefix(want, "error: "))) {
			t.Errorf("oneServiceArg(%q) = %q, want %q", args, got, want)
		}
	}
	if _, err := runLegion(t, "", "rollout", "status", "service", "web", "api"); err == nil || !strings.Contains(err.Error(), "accepts between 1 and 2 arg(s)") {
		t.Errorf("rollout status of three words: %v", err)
	}
}
