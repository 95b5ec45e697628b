package server

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

// teamUser is an admission fixture with namespace team and its edit
// user mallory, as a client of mallory's own.
func teamUser(t *testing.T) (*manager, *client.Client, *client.Client) {
	t.Helper()
	m, admin := admitFixture(t)
	if _, err := admin.Apply(context.Background(), []legion.Object{namespaceObj("team"), roleBinding("team", "mallory", legion.RoleEdit)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	return m, admin, userClient(t, admin, m.addr, "mallory")
}

// TestAdmissionPublishingIsTheAdmins: a published port is the nodes', so
// a namespace user may publish a new one only where the cluster admin
// let its Namespace (allow: [publish]); what the service already
// publishes stays theirs to keep (a scale), and the admin publishes
// freely.
func TestAdmissionPublishingIsTheAdmins(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t)
	ctx := context.Background()
	apply := func(c *client.Client, yaml string) error {
		_, err := c.Apply(ctx, mustParse(t, yaml), client.ApplyOptions{})
		return err
	}
	err := apply(mallory, publishing("team", "ssh", "tcp", "ingress", 22))
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(),
		"Service team/ssh: spec.endpoint.ports[0].publishedPort: 22/tcp would be taken on the nodes, which are not namespace team's: its users may publish ports once Namespace team lists publish in spec.security.allow") {
		t.Fatalf("a user publishing port 22: %v, want PERMISSION_DENIED naming the allow entry", err)
	}
	if _, _, err := m.s.store().Get(legion.KindService, "team", "ssh"); err == nil {
		t.Fatal("the refused service was written")
	}
	// The admin publishes; the user may then change the service while
	// what it publishes stays, not publish more.
	applyOK(t, admin, publishing("team", "web", "tcp", "ingress", 30080))
	if err := apply(mallory, strings.Replace(publishing("team", "web", "tcp", "ingress", 30080), "replicas: 1", "replicas: 2", 1)); err != nil {
		t.Fatalf("a user scaling a service that keeps its published port: %v", err)
	}
	if err := apply(mallory, publishing("team", "web", "tcp", "ingress", 30081)); client.Code(err) != codes.PermissionDenied {
		t.Fatalf("a user moving the published port: %v, want PERMISSION_DENIED", err)
	}
	// Allowed by the admin, the namespace's users publish.
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "team"
	ns.(*legion.Namespace).Spec.Security.Allow = []string{legion.AllowPublish}
	if _, err := admin.ApplyOne(ctx, ns, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apply(mallory, publishing("team", "api", "tcp", "ingress", 30090)); err != nil {
		t.Fatalf("a user publishing where the Namespace allows it: %v", err)
	}
}

// TestAdmissionSystemPorts: nobody publishes a port the cluster listens
// on itself, here the manager's API.
func TestAdmissionSystemPorts(t *testing.T) {
	t.Parallel()
	m, admin := admitFixture(t)
	_, p, err := net.SplitHostPort(m.addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	for _, mode := range []string{"ingress", "host"} {
		applyRefused(t, m, admin, publishing("default", "api", "tcp", mode, port), codes.AlreadyExists,
			"spec.endpoint.ports[0].publishedPort: "+p+"/tcp is the cluster's own (a manager's API at "+m.addr+")")
	}
	// The same number over UDP is another port.
	applyOK(t, admin, publishing("default", "api", "udp", "ingress", port))
}
