package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

func mustParse(t *testing.T, manifest string) []legion.Object {
	t.Helper()
	objs, err := legion.ParseManifest("t.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// get's tables say per kind what matters: services their mode, ready
// replicas of wanted, image, published ports and update state; nodes
// their hostname, address, state, availability and role; other kinds
// their metadata.
func TestGetTablesPerKind(t *testing.T) {
	t.Parallel()
	svcs := mustParse(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 3
  pod: {containers: [{name: c, image: "nginx:1.25", ports: [{name: http, containerPort: 80}]}]}
  endpoint: {ports: [{name: http, port: 80, targetPort: http, publish: ingress, publishedPort: 8080}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: agent}
spec:
  mode: global
  pod: {containers: [{name: c, image: "agent:5"}]}
`)
	web := svcs[0].(*legion.Service)
	web.Status.Running, web.Status.Ready = 3, 1 // two crash-looping: running, not ready
	web.Status.Update = &legion.UpdateStatus{State: legion.UpdatePaused}
	svcs[1].(*legion.Service).Status.Ready = 2
	nodes := mustParse(t, `apiVersion: legion/v1
kind: Node
metadata: {name: w1}
spec: {role: worker, availability: drain}
`)
	n := nodes[0].(*legion.Node)
	n.Status.Hostname, n.Status.Addr, n.Status.State = "box1", "192.0.2.7", legion.NodeReady
	cfgs := mustParse(t, `apiVersion: legion/v1
kind: Config
metadata: {name: site, labels: {app: web}}
spec: {text: hi}
`)
	for _, tc := range []struct {
		name string
		objs []legion.Object
		ns   bool
		want string
	}{
		{"services", svcs, false, "NAME   MODE        REPLICAS  IMAGE       PORTS           UPDATE\n" +
			"web    replicated  1/3       nginx:1.25  8080->http/tcp  paused\n" +
			"agent  global      2         agent:5     -               -\n"},
		{"nodes", nodes, false, "NAME  HOSTNAME  ADDRESS    STATE  AVAILABILITY  ROLE\n" +
			"w1    box1      192.0.2.7  ready  drain         worker\n"},
		{"configs across namespaces", cfgs, true, "NAMESPACE  NAME  VERSION  GENERATION  LABELS\n" +
			"default    site  0        0           app=web\n"},
	} {
		var b bytes.Buffer
		if err := printObjects(&b, "table", tc.objs, tc.ns); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, b.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
