package server

import (
	"context"
	"strconv"
	"testing"

	"github.com/legionbsd/legion"
	"google.golang.org/grpc/codes"
)

func publishing(ns, name, proto, publish string, port int) string {
	p := strconv.Itoa(port)
	return `apiVersion: legion/v1
kind: Service
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: web:1, ports: [{containerPort: 8080, protocol: ` + proto + `}]}]}
  endpoint: {ports: [{port: 80, protocol: ` + proto + `, targetPort: 8080, publish: ` + publish + `, publishedPort: ` + p + `}]}
`
}

// TestAdmissionPublishedPorts: a published port, ingress or host mode,
// belongs to one service cluster-wide; a second service asking for it is
// refused, naming the first.
func TestAdmissionPublishedPorts(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	applyOK(t, c, publishing("pa", "web", "tcp", "ingress", 30080))
	applyOK(t, c, publishing("pa", "web", "tcp", "ingress", 30080)) // itself again
	cases := []struct{ name, yaml string }{
		{"ingress, other namespace", publishing("pb", "web", "tcp", "ingress", 30080)},
		{"host mode on an ingress port", publishing("pa", "api", "tcp", "host", 30080)},
	}
	for _, tc := range cases {
		applyRefused(t, m, c, tc.yaml, codes.AlreadyExists, "spec.endpoint.ports[0].publishedPort: 30080/tcp is already published by service pa/web")
	}
	// Host mode owns its port too.
	applyOK(t, c, publishing("pa", "edge", "tcp", "host", 30443))
	applyRefused(t, m, c, publishing("pb", "edge", "tcp", "ingress", 30443), codes.AlreadyExists, "already published by service pa/edge")
	// Another protocol is another port.
	applyOK(t, c, publishing("pb", "dns", "udp", "ingress", 30080))
	// Two services of one apply.
	applyRefused(t, m, c, publishing("pc", "a", "tcp", "ingress", 30090)+"---\n"+publishing("pc", "b", "tcp", "ingress", 30090),
		codes.AlreadyExists, "30090/tcp is already published by service pc/a")
	// Moving the port off frees it.
	applyOK(t, c, publishing("pa", "web", "tcp", "ingress", 30081))
	applyOK(t, c, publishing("pb", "web", "tcp", "ingress", 30080))
	// Deleting the owner frees it.
	if _, err := c.Delete(ctx, legion.KindService, "pa", "edge", nil); err != nil {
		t.Fatal(err)
	}
	applyOK(t, c, publishing("pb", "edge", "tcp", "ingress", 30443))
}
