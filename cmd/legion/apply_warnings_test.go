package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/daemon"
)

// node is a Node of that name, runtime and state, as the warnings read it.
func node(name, runtime string, state legion.NodeState) *legion.Node {
	n := &legion.Node{Header: legion.Header{Metadata: legion.Metadata{Name: name}}}
	n.Status.Runtime, n.Status.State = runtime, state
	return n
}

func TestUnservedRoutes(t *testing.T) {
	t.Parallel()
	route := func(name string, tls bool) *legion.Route {
		r := &legion.Route{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindRoute, Metadata: legion.Metadata{Name: name}}}
		if tls {
			r.Spec.TLS = &legion.RouteTLS{Secret: "cert"}
		}
		return r
	}
	node := func(state legion.NodeState, in *legion.NodeIngress) *legion.Node {
		n := &legion.Node{}
		n.Status.State, n.Status.Ingress = state, in
		return n
	}
	plain, secure := route("plain", false), route("secure", true)
	for _, tc := range []struct {
		name  string
		nodes []*legion.Node
		want  []string // the routes warned of
	}{
		{"no node serves", []*legion.Node{node(legion.NodeReady, nil)}, []string{"route/plain", "route/secure"}},
		{"HTTP only", []*legion.Node{node(legion.NodeReady, &legion.NodeIngress{HTTP: ":80"})}, []string{"route/secure"}},
		{"both, on two nodes", []*legion.Node{node(legion.NodeReady, &legion.NodeIngress{HTTP: ":80"}), node(legion.NodeReady, &legion.NodeIngress{HTTPS: ":443"})}, nil},
		{"the serving node is down", []*legion.Node{node(legion.NodeDown, &legion.NodeIngress{HTTP: ":80", HTTPS: ":443"})}, []string{"route/plain", "route/secure"}},
	} {
		var got []string
		for _, w := range unservedRoutes([]*legion.Route{plain, secure}, tc.nodes) {
			got = append(got, w[:strings.Index(w, ":")])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: warned of %q, want %q", tc.name, got, tc.want)
		}
	}
	if w := unservedRoutes([]*legion.Route{secure}, nil); len(w) != 1 || !strings.Contains(w[0], "over HTTPS; start one with --ingress-tls-listen") {
		t.Errorf("an HTTPS route without a node: %q", w)
	}
}

func TestUnenforcedLimits(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: capped}
spec:
  pod: {containers: [{name: c, image: a:1, resources: {limits: {memory: 64Mi}}}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: free}
spec:
  pod: {containers: [{name: c, image: a:1}]}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: c, image: a:1, resources: {limits: {cpu: 1}}}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	jails := []*legion.Node{node("j1", legion.NodeRuntimeJails, legion.NodeReady), node("p0", legion.NodeRuntimeProcess, legion.NodeDown)}
	if w := unenforcedLimits(objs, jails); len(w) != 0 {
		t.Errorf("jails nodes (and a process node that is down): %q, want none", w)
	}
	w := unenforcedLimits(objs, append(jails, node("p2", legion.NodeRuntimeProcess, legion.NodeReady), node("p1", legion.NodeRuntimeProcess, legion.NodeReady)))
	want := []string{
		"service/capped: its resource limits are not enforced on process-platform nodes (p1, p2), where its tasks may run: only FreeBSD jails nodes apply them",
		"cronjob/nightly: its resource limits are not enforced on process-platform nodes (p1, p2), where its tasks may run: only FreeBSD jails nodes apply them",
	}
	if !slices.Equal(w, want) {
		t.Errorf("with process nodes:\n got %q\nwant %q", w, want)
	}
}

// NetworkPolicies, and locked Namespaces, are said not to be enforced
// where process-platform nodes are ready; a Namespace with the default
// isolation asked for nothing, and an open one is what those nodes do.
func TestUnenforcedPolicies(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Namespace
metadata: {name: vault}
spec: {isolation: locked}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: plain}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: lobby}
spec: {isolation: open}
---
apiVersion: legion/v1
kind: NetworkPolicy
metadata: {name: db-access, namespace: shop}
spec:
  services: {app: db}
  ingress: [{from: [{services: {app: web}}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := unenforcedPolicies(objs, []*legion.Node{node("j1", legion.NodeRuntimeJails, legion.NodeReady)}); len(w) != 0 {
		t.Errorf("jails nodes: %q, want none", w)
	}
	w := unenforcedPolicies(objs, []*legion.Node{node("j1", legion.NodeRuntimeJails, legion.NodeReady), node("p1", legion.NodeRuntimeProcess, legion.NodeReady)})
	want := []string{
		"namespace/vault: not enforced on process-platform nodes (p1), where the namespace's tasks may run: they have no pf, so their pods reach each other whatever it says; only FreeBSD jails nodes enforce network policy",
		"networkpolicy/db-access -n shop: not enforced on process-platform nodes (p1), where the namespace's tasks may run: they have no pf, so their pods reach each other whatever it says; only FreeBSD jails nodes enforce network policy",
	}
	if !slices.Equal(w, want) {
		t.Errorf("with a process node:\n got %q\nwant %q", w, want)
	}
}

// A Route leads nowhere without its service or a port of it it can
// tell; a manifest's Route without a namespace is the default's.
func TestUnroutedRoutes(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Route
metadata: {name: fine}
spec: {host: a.example.test, service: web, port: http}
---
apiVersion: legion/v1
kind: Route
metadata: {name: gone}
spec: {host: b.example.test, service: api}
---
apiVersion: legion/v1
kind: Route
metadata: {name: wrong-port, namespace: shop}
spec: {host: c.example.test, service: web, port: https}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: web:1, ports: [{name: http, containerPort: 8080}]}]}
  endpoint: {ports: [{name: http, port: 80, targetPort: http}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	web := objs[3].(*legion.Service)
	web.Metadata.Namespace = legion.DefaultNamespace
	shopWeb := *web
	shopWeb.Metadata.Namespace = "shop"
	services := map[string][]*legion.Service{legion.DefaultNamespace: {web}, "shop": {&shopWeb}}
	got := unroutedRoutes(routesOf(objs), services)
	want := []string{
		"route/gone: no service api in namespace default: the ingress answers its requests with 503 until that changes",
		"route/wrong-port -n shop: service web has no TCP port https: the ingress answers its requests with 503 until that changes",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// Sizes the process platform does not hold data to are warned of: a zfs
// Volume's unless it is kept on a jails node, a workload's claims and
// tmpfs volumes; nothing without a size, and nothing on jails nodes.
func TestUnenforcedSizes(t *testing.T) {
	t.Parallel()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Volume
metadata: {name: data}
spec: {size: 1Gi}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: unsized}
spec: {}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: on-jails}
spec: {size: 1Gi, node: j1}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: on-process}
spec: {size: 1Gi, node: p1}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: share}
spec: {driver: nfs, nfs: {server: 192.0.2.1, path: /export}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  replicas: 1
  pod:
    containers: [{name: c, image: db:1, volumeMounts: [{name: data, path: /data}]}]
    volumes: [{name: data, claim: {size: 2Gi}}]
---
apiVersion: legion/v1
kind: Job
metadata: {name: scratch}
spec:
  pod:
    containers: [{name: c, image: j:1, volumeMounts: [{name: tmp, path: /tmp}]}]
    volumes: [{name: tmp, tmpfs: {size: 64Mi}}]
---
apiVersion: legion/v1
kind: Job
metadata: {name: unbounded}
spec:
  pod:
    containers: [{name: c, image: j:1, volumeMounts: [{name: tmp, path: /tmp}]}]
    volumes: [{name: tmp, tmpfs: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := unenforcedSizes(objs, []*legion.Node{node("j1", legion.NodeRuntimeJails, legion.NodeReady)}); len(w) != 0 {
		t.Errorf("jails nodes: %q, want none", w)
	}
	w := unenforcedSizes(objs, []*legion.Node{node("j1", legion.NodeRuntimeJails, legion.NodeReady), node("p1", legion.NodeRuntimeProcess, legion.NodeReady)})
	volume := ": its size is not enforced on process-platform nodes (p1), where it may be kept: there a Volume is a plain directory; only FreeBSD jails nodes (ZFS) hold it to its size"
	workload := ": the sizes of its claims and tmpfs volumes are not enforced on process-platform nodes (p1), where its tasks may run: there they are plain directories; only FreeBSD jails nodes hold them to their sizes"
	want := []string{"volume/data" + volume, "volume/on-process" + volume, "service/db" + workload, "job/scratch" + workload}
	if !slices.Equal(w, want) {
		t.Errorf("with a process node:\n got %q\nwant %q", w, want)
	}
}

// On a cluster, apply warns of a Route no node serves, and not once a
// node serves Routes; the node's description says where it does; and of a
// Route whose service is missing, until it is there. Limits and a
// Volume's size are warned of on the process platform's nodes.
func TestApplyWarnsOfARouteNoNodeServes(t *testing.T) {
	t.Parallel()
	const routeYAML = `
apiVersion: legion/v1
kind: Route
metadata: {name: web}
spec: {host: web.example.test, service: web, port: http}
---
apiVersion: legion/v1
kind: Job
metadata: {name: capped}
spec:
  pod: {containers: [{name: c, image: localhost/none:1, pullPolicy: never, resources: {limits: {memory: 64Mi}}}]}
`
	for _, tc := range []struct {
		name   string
		listen string
		warned bool
	}{{"without ingress", "", true}, {"with ingress", "127.0.0.1:0", false}} {
		t.Run(tc.name, func(t *testing.T) {
			n := startCluster(t, func(o *daemon.Options) { o.IngressListen = tc.listen })
			flags := []string{"--server", n.API, "--credentials", n.Admin}
			// The node registers as the daemon starts.
			waitFor(t, "the node registered", func() bool {
				out, err := runLegion(t, "", append([]string{"get", "nodes"}, flags...)...)
				return err == nil && strings.Contains(out, "ready")
			})
			out, err := runLegion(t, routeYAML, append([]string{"apply", "-f", "-"}, flags...)...)
			if err != nil || !strings.Contains(out, "route/web created") {
				t.Fatalf("apply: %v\n%s", err, out)
			}
			warned := strings.Contains(out, "warning: route/web: no ready node serves Routes over HTTP; start one with --ingress-listen")
			if warned != tc.warned {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.warned, out)
			}
			if !strings.Contains(out, "warning: job/capped: its resource limits are not enforced on process-platform nodes ("+n.Name+")") {
				t.Errorf("no warning of the limits a process node ignores:\n%s", out)
			}
			// A Volume alone: the process node keeps it as a plain
			// directory, without its size.
			vol := "apiVersion: legion/v1\nkind: Volume\nmetadata: {name: scratch}\nspec: {size: 1Gi}\n"
			if out, err := runLegion(t, vol, append([]string{"apply", "-f", "-"}, flags...)...); err != nil ||
				!strings.Contains(out, "warning: volume/scratch: its size is not enforced on process-platform nodes ("+n.Name+")") {
				t.Errorf("apply of a sized Volume: %v, want a warning that its size is not enforced:\n%s", err, out)
			}
			// Its service does not exist: the ingress would answer 503.
			unrouted := "warning: route/web: no service web in namespace default: the ingress answers its requests with 503 until that changes"
			if !strings.Contains(out, unrouted) {
				t.Errorf("no warning that the route's service is missing:\n%s", out)
			}
			if got, err := runLegion(t, "", append([]string{"get", "routes"}, flags...)...); err != nil || !strings.Contains(got, unrouted) {
				t.Errorf("get routes: %v, want it to say the service is missing:\n%s", err, got)
			}
			web := helloApp("web", "        ports: [{name: http, containerPort: 8080}]\n") + "  endpoint: {ports: [{name: http, port: 80, targetPort: http}]}\n"
			if out, err := runLegion(t, web, append([]string{"apply", "-f", "-"}, flags...)...); err != nil || strings.Contains(out, "route/web") {
				t.Errorf("apply of the route's service: %v, want no word of the route:\n%s", err, out)
			}
			// legion get routes says it too, after the listing; a listing
			// of jobs leaves the limits to apply.
			got, err := runLegion(t, "", append([]string{"get", "routes"}, flags...)...)
			if warned := strings.Contains(got, "warning: route/web: no ready node serves Routes over HTTP"); err != nil ||
				!strings.Contains(got, "web.example.test") || warned != tc.warned {
				t.Errorf("get routes: warned %v, want %v (%v):\n%s", warned, tc.warned, err, got)
			}
			if strings.Contains(got, "no service web") {
				t.Errorf("get routes: the route's service is there now:\n%s", got)
			}
			if got, err := runLegion(t, "", append([]string{"get", "jobs"}, flags...)...); err != nil || strings.Contains(got, "warning") {
				t.Errorf("get jobs: %v\n%s", err, got)
			}
			desc, err := runLegion(t, "", append([]string{"describe", "node", n.Name}, flags...)...)
			if served := strings.Contains(desc, "Ingress:") && strings.Contains(desc, "serves Routes over HTTP at 127.0.0.1:0"); err != nil || served == tc.warned {
				t.Errorf("describe node (ingress %q): %v\n%s", tc.listen, err, desc)
			}
		})
	}
}

// A Secret updated by apply is said to stay as it was in the tasks that
// already run of the workloads using it: a task takes its Secrets when it
// starts. Unchanged, or used by no workload, nothing is said.
func TestApplyWarnsThatRunningTasksKeepAnUpdatedSecret(t *testing.T) {
	t.Parallel()
	const users = `
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: localhost/none:1, pullPolicy: never, secrets: [{name: pw}]}]}
---
apiVersion: legion/v1
kind: Job
metadata: {name: migrate}
spec:
  pod: {containers: [{name: c, image: localhost/none:1, pullPolicy: never, env: [{name: PW, secret: pw}]}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: pulls}
spec:
  pod: {imagePullSecrets: [pw], containers: [{name: c, image: localhost/none:1, pullPolicy: never}]}
`
	secret := func(v string) string {
		return "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: pw}\nspec: {text: " + v + "}\n"
	}
	n := startCluster(t)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	apply := func(manifest string) string {
		t.Helper()
		out, err := runLegion(t, manifest, append([]string{"apply", "-f", "-"}, flags...)...)
		if err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		return out
	}
	if out := apply(secret("one") + "---" + users); strings.Contains(out, "warning: secret/pw") {
		t.Fatalf("a new Secret's apply warns:\n%s", out)
	}
	out := apply(secret("two"))
	want := "warning: secret/pw: the tasks of service/web, job/migrate that already run keep the value they started with, in files and environment, until they are replaced"
	if !strings.Contains(out, "secret/pw updated") || !strings.Contains(out, want) {
		t.Fatalf("apply of a new value:\n%s\nwant %q", out, want)
	}
	if out := apply(secret("two")); strings.Contains(out, "warning: secret/pw") {
		t.Fatalf("apply of the same value warns:\n%s", out)
	}
}
