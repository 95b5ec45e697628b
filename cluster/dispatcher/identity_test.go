package dispatcher_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// startIssuing runs a Dispatcher that signs renewals with its CA.
func startIssuing(t *testing.T) *dispatchertest.Manager {
	t.Helper()
	ca := dispatchertest.NewCA(t)
	return dispatchertest.ServeWith(t, ca, dispatcher.Fixed(dispatchertest.OpenStore(t)), nil, dispatcher.Options{
		Issue: func(csr []byte, id pki.Identity) ([]byte, error) { return ca.Issue(csr, id, nil, time.Now()) }})
}

// refusedAs checks that a call was refused as a certificate not issued to
// the node it names.
func refusedAs(t *testing.T, what, node string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not one this cluster issued to node "+node) {
		t.Errorf("%s: %v, want PermissionDenied naming node %s", what, err, node)
	}
}

func recordOf(t *testing.T, st *store.Store, node string) *pki.NodeCerts {
	t.Helper()
	r, _, err := dispatcher.ReadCerts(st, node)
	if err != nil || r == nil {
		t.Fatalf("record of %s: %v %v", node, r, err)
	}
	return r
}

// A certificate the CA signed for a node's name, but not the one the
// cluster issued that node (an attacker's, who got one signed for another
// name), does nothing as that node: neither registering over its Node,
// nor its heartbeats, reports, assignments (with their Secret values) or
// renewals; the node itself carries on.
func TestCertificateNotIssuedToTheNodeIsRefused(t *testing.T) {
	t.Parallel()
	m := startIssuing(t)
	worker := dispatchertest.Credentials(t, m.CA, "node-b", pki.RoleWorker)
	manager := dispatchertest.Credentials(t, m.CA, "m-1", pki.RoleManager)
	dispatchertest.Record(t, m.Store, worker)
	dispatchertest.Record(t, m.Store, manager)
	put(t, m.Store, secret("web", "token", "s3cret"))
	put(t, m.Store, task("web", "b-1", "node-b", "token", "", ""))
	legit := dialTLS(t, m.Addr, worker.ClientConfig())
	register(t, legit, legion.NodeStatus{Addr: "10.0.0.2", WireGuard: &legion.WireGuard{PublicKey: "legit"}})
	before := getNode(t, m.Store, "node-b")

	forged := map[string]*pki.Credentials{
		"node-b": dispatchertest.Credentials(t, m.CA, "node-b", pki.RoleWorker),
		"m-1":    dispatchertest.Credentials(t, m.CA, "m-1", pki.RoleManager),
	}
	for node, creds := range forged {
		c := dialTLS(t, m.Addr, creds.ClientConfig())
		data, _ := json.Marshal(legion.NodeStatus{Addr: "203.0.113.6", WireGuard: &legion.WireGuard{PublicKey: "impostor"}})
		_, err := c.Register(ctxT(t), &legionpb.RegisterRequest{Status: data})
		refusedAs(t, "register as "+node, node, err)
		_, err = c.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{})
		refusedAs(t, "heartbeat as "+node, node, err)
		_, err = c.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "b-1", Status: []byte(`{"state":"failed"}`)})
		refusedAs(t, "report as "+node, node, err)
		s, err := c.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
		if err == nil {
			var set *legionpb.AssignmentSet
			set, err = s.Recv()
			if set != nil {
				t.Errorf("assignments as %s: got a set of %d tasks", node, len(set.GetTasks()))
			}
		}
		refusedAs(t, "assignments as "+node, node, err)
		_, csr := dispatchertest.NewCSR(t, node)
		_, err = c.Renew(ctxT(t), &legionpb.RenewRequest{Csr: csr})
		refusedAs(t, "renewal as "+node, node, err)
	}

	after := getNode(t, m.Store, "node-b")
	if after.Metadata.Version != before.Metadata.Version || after.Status.Addr != "10.0.0.2" || after.Status.WireGuard.PublicKey != "legit" {
		t.Errorf("node-b after the forged calls: version %d (was %d), addr %s, key %s", after.Metadata.Version, before.Metadata.Version,
			after.Status.Addr, after.Status.WireGuard.PublicKey)
	}
	o, _, err := m.Store.Get(legion.KindTask, "web", "b-1")
	if err != nil || o.(*legion.Task).Status.State == legion.TaskFailed {
		t.Errorf("task b-1 after a forged report: %v", err)
	}
	for node, creds := range forged {
		if r := recordOf(t, m.Store, node); len(r.Certs) != 1 || r.Holds(creds.Cert.Leaf) {
			t.Errorf("record of %s after the forged calls: %+v", node, r.Certs)
		}
	}
	// The node itself still works, its Secret included.
	if _, err := legit.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{}); err != nil {
		t.Fatalf("node-b's own heartbeat: %v", err)
	}
	s, err := legit.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.Recv()
	if err != nil {
		t.Fatalf("node-b's own assignments: %v", err)
	}
	if got := set.GetValues()[legion.Key(legion.KindSecret, "web", "token")]; string(got) != "s3cret" || len(set.GetTasks()) != 1 {
		t.Errorf("node-b's own assignments: %d tasks, token %q", len(set.GetTasks()), got)
	}
}

// A renewal is recorded before it is handed out: the renewed certificate
// is the node's from then on, and the one before stays accepted for the
// connections still open on it.
func TestRenewedCertificateIsTheNodes(t *testing.T) {
	t.Parallel()
	m := startIssuing(t)
	first := dispatchertest.Credentials(t, m.CA, "node-b", pki.RoleWorker)
	dispatchertest.Record(t, m.Store, first)
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.CSR(key, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := dialTLS(t, m.Addr, first.ClientConfig()).Renew(ctxT(t), &legionpb.RenewRequest{Csr: csr})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.KeyPEM(key)
	renewed, err := pki.NewCredentials(resp.Certificate, keyPEM, m.CA.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	if r := recordOf(t, m.Store, "node-b"); !r.Holds(renewed.Cert.Leaf) || !r.Holds(first.Cert.Leaf) {
		t.Fatalf("record after the renewal: %+v", r.Certs)
	}
	register(t, dialTLS(t, m.Addr, renewed.ClientConfig()), legion.NodeStatus{Addr: "10.0.0.2"})
	if _, err := dialTLS(t, m.Addr, first.ClientConfig()).Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{}); err != nil {
		t.Fatalf("the certificate before the renewal: %v", err)
	}
}

// A node with no record (it joined before records were kept) has the
// first certificate it calls the leader with recorded; no other
// certificate of its name passes after that.
func TestUnrecordedNodeIsRecordedOnFirstUse(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	first := dispatchertest.Credentials(t, m.CA, "node-c", pki.RoleWorker)
	register(t, dialTLS(t, m.Addr, first.ClientConfig()), legion.NodeStatus{Addr: "10.0.0.3"})
	if r := recordOf(t, m.Store, "node-c"); !r.Holds(first.Cert.Leaf) || r.Role != pki.RoleWorker {
		t.Fatalf("record after the first registration: %+v", r)
	}
	other := dialTLS(t, m.Addr, dispatchertest.Credentials(t, m.CA, "node-c", pki.RoleWorker).ClientConfig())
	_, err := other.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{})
	refusedAs(t, "a second certificate of node-c", "node-c", err)
}

// A node's heartbeats are not checked against its certificate record
// each time once its certificate passed (see holdsStill), but another
// certificate for the same name is checked in full every time, and the
// node's removal refuses its next heartbeats as soon as this manager's
// cache took it.
func TestHeartbeatPassIsCheckedAgainAfterARecordChanged(t *testing.T) {
	t.Parallel()
	m := startIssuing(t)
	worker := dispatchertest.Credentials(t, m.CA, "node-b", pki.RoleWorker)
	dispatchertest.Record(t, m.Store, worker)
	legit := dialTLS(t, m.Addr, worker.ClientConfig())
	register(t, legit, legion.NodeStatus{Addr: "10.0.0.2"})
	for range 3 {
		if _, err := legit.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{}); err != nil {
			t.Fatalf("node-b's heartbeat: %v", err)
		}
	}
	forged := dialTLS(t, m.Addr, dispatchertest.Credentials(t, m.CA, "node-b", pki.RoleWorker).ClientConfig())
	for range 2 {
		_, err := forged.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{})
		refusedAs(t, "a heartbeat with another certificate of node-b after node-b's passed", "node-b", err)
	}
	if _, err := legit.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{}); err != nil {
		t.Fatalf("node-b's heartbeat after the forged ones: %v", err)
	}

	if err := dispatcher.RecordRemoval(ctxT(t), m.Store, "node-b", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := legit.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{})
		if status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "was removed from the cluster") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-b's heartbeat 5s after its removal: %v, want it refused as removed", err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the cache to take the removal
	}
}
