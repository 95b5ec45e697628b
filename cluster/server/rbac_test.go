package server

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"google.golang.org/grpc/codes"
)

// userClient has the cluster issue a user certificate and returns a
// client holding it.
func userClient(t *testing.T, admin *client.Client, addr, name string) *client.Client {
	t.Helper()
	key, csr := dispatchertest.NewCSR(t, name)
	cert, ca, err := admin.IssueUser(context.Background(), name, csr)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.KeyPEM(key)
	path := filepath.Join(t.TempDir(), name+".pem")
	if err := pki.WriteFile(path, pki.Bundle(cert, keyPEM, ca)); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Server: addr, CredentialsFile: path, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roleBinding(ns, user string, role legion.Role) legion.Object {
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = user, ns
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: user, Role: role}
	return b
}

func secretObj(ns, name string) legion.Object {
	s, _ := legion.New(legion.KindSecret)
	s.GetMetadata().Name, s.GetMetadata().Namespace = name, ns
	s.(*legion.Secret).Spec.Data = []byte("s3cret")
	return s
}

func namespaceObj(name string) legion.Object {
	n, _ := legion.New(legion.KindNamespace)
	n.GetMetadata().Name = name
	return n
}

func refused(t *testing.T, what string, err error, says string) {
	t.Helper()
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: %v, want PERMISSION_DENIED saying %q", what, err, says)
	}
}

// A user holds only what its RoleBindings give, namespace by namespace:
// view reads all but Secrets, edit also Secrets and writes, admin also
// RoleBindings; cluster-scoped objects, tokens and certificates are the
// cluster admin's.
func TestUsersActWithinTheirRoles(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx := context.Background()
	for _, o := range []legion.Object{namespaceObj("shop"), namespaceObj("lab")} {
		if _, err := admin.ApplyOne(ctx, o, client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Apply(ctx, []legion.Object{configObj("shop", "c1", "a"), configObj("lab", "c2", "b"), secretObj("shop", "pw"),
		roleBinding("shop", "alice", legion.RoleView)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := userClient(t, admin, m.addr, "alice")

	if _, err := alice.Get(ctx, legion.KindConfig, "shop", "c1"); err != nil {
		t.Fatalf("view reads a config: %v", err)
	}
	_, err := alice.Get(ctx, legion.KindSecret, "shop", "pw")
	refused(t, "view reading a secret", err, "alice is view in namespace shop; to read Secrets it needs edit")
	_, err = alice.Get(ctx, legion.KindConfig, "lab", "c2")
	refused(t, "another namespace", err, "no role in namespace lab")
	all, _, err := alice.List(ctx, legion.KindConfig, client.ListOptions{AllNamespaces: true})
	if err != nil || len(all) != 1 || all[0].GetMetadata().Namespace != "shop" {
		t.Fatalf("list across namespaces shows %d objects (%v), want shop's only", len(all), err)
	}
	_, err = alice.ApplyOne(ctx, configObj("shop", "c3", "x"), client.ApplyOptions{})
	refused(t, "view applying", err, "needs edit")
	_, _, err = alice.List(ctx, legion.KindNode, client.ListOptions{})
	refused(t, "listing nodes", err, "cluster-scoped")
	// The Namespace of a namespace the user works in is theirs to read
	// (its quota, what it uses and allows), and no other.
	if _, err := alice.Get(ctx, legion.KindNamespace, "", "shop"); err != nil {
		t.Errorf("view reading its own Namespace: %v", err)
	}
	_, err = alice.Get(ctx, legion.KindNamespace, "", "lab")
	refused(t, "reading another team's Namespace", err, "user alice has no role in namespace lab (to read its Namespace it needs view)")
	if nss, _, err := alice.List(ctx, legion.KindNamespace, client.ListOptions{}); err != nil || len(nss) != 1 || nss[0].GetMetadata().Name != "shop" {
		t.Errorf("listing namespaces shows %v (%v), want shop alone", nss, err)
	}
	_, err = alice.ApplyOne(ctx, namespaceObj("shop"), client.ApplyOptions{})
	refused(t, "writing its own Namespace", err, "cluster-scoped")
	noEvents := func(legion.Event) error { return nil }
	if err := alice.Events(ctx, client.EventsOptions{Kind: legion.KindNamespace, Object: "shop"}, noEvents); err != nil {
		t.Errorf("the events of its own Namespace (describe ns): %v", err)
	}
	err = alice.Events(ctx, client.EventsOptions{Kind: legion.KindNamespace, Object: "lab"}, noEvents)
	refused(t, "the events of another team's Namespace", err, "user alice has no role in namespace lab")
	err = alice.Events(ctx, client.EventsOptions{Namespace: "lab"}, noEvents)
	refused(t, "the events of another namespace", err, "user alice has no role in namespace lab (to read its events it needs view)")
	_, err = alice.Token(ctx, "worker")
	refused(t, "a join token", err, "not allowed for a user certificate")
	key, _ := pki.NewKey()
	csr, _ := pki.CSR(key, "mallory")
	_, _, err = alice.IssueUser(ctx, "mallory", csr)
	refused(t, "issuing a user", err, "not allowed for a user certificate")
	err = alice.Backup(ctx, io.Discard)
	refused(t, "a backup of the control state", err, "/legion.v1.Cluster/Backup: not allowed for a user certificate (alice)")
	if err != nil && strings.Contains(err.Error(), "rpc error") {
		t.Errorf("a refused backup says %q: want the server's message, as other calls say it", err)
	}

	// Raised to edit: writes and Secrets, but not RoleBindings.
	if _, err := admin.ApplyOne(ctx, roleBinding("shop", "alice", legion.RoleEdit), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ApplyOne(ctx, configObj("shop", "c3", "x"), client.ApplyOptions{}); err != nil {
		t.Fatalf("edit applying: %v", err)
	}
	if _, err := alice.Get(ctx, legion.KindSecret, "shop", "pw"); err != nil {
		t.Fatalf("edit reading a secret: %v", err)
	}
	if _, err := alice.Delete(ctx, legion.KindConfig, "shop", "c3", nil); err != nil {
		t.Fatalf("edit deleting: %v", err)
	}
	_, err = alice.ApplyOne(ctx, roleBinding("shop", "mallory", legion.RoleAdmin), client.ApplyOptions{})
	refused(t, "edit binding a role", err, "needs admin")
	_, err = alice.Apply(ctx, []legion.Object{configObj("shop", "c4", "x"), configObj("lab", "c4", "x")}, client.ApplyOptions{})
	refused(t, "an apply reaching another namespace", err, "nothing applied")
	if _, err := admin.Get(ctx, legion.KindConfig, "shop", "c4"); client.Code(err) != codes.NotFound {
		t.Errorf("a refused apply wrote its other objects: %v", err)
	}

	// The user named admin is the cluster admin's.
	_, _, err = admin.IssueUser(ctx, "admin", csr)
	if client.Code(err) != codes.InvalidArgument {
		t.Errorf("a user named admin: %v", err)
	}
}

// A user's watch across namespaces shows what it may read only.
func TestUserWatchShowsOnlyReadableNamespaces(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := admin.Apply(ctx, []legion.Object{namespaceObj("shop"), namespaceObj("lab"), roleBinding("shop", "bob", legion.RoleView)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	bob := userClient(t, admin, m.addr, "bob")
	_, at, err := bob.List(ctx, legion.KindConfig, client.ListOptions{AllNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bob.Watch(ctx, legion.KindConfig, client.ListOptions{AllNamespaces: true}, at)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, o := range []legion.Object{configObj("lab", "hidden", "x"), configObj("shop", "shown", "x")} {
		if _, err := admin.ApplyOne(ctx, o, client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if n := e.Object.GetMetadata(); n.Namespace != "shop" || n.Name != "shown" {
		t.Fatalf("bob's watch showed %s/%s first, want shop/shown (lab's is not his)", n.Namespace, n.Name)
	}
}
