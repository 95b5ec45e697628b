package server

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testpoll"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// joinRaw sends a Join as a joining node does (checking the CA against
// the token's digest), with whatever id it is given.
func joinRaw(t *testing.T, addr, token, id, role, advertise string) (*pb.JoinResponse, error) {
	t.Helper()
	_, csr := dispatchertest.NewCSR(t, "whoever")
	return joinWith(t, addr, token, id, role, advertise, csr)
}

// joinWith is joinRaw with the certificate request csr.
func joinWith(t *testing.T, addr, token, id, role, advertise string, csr []byte) (*pb.JoinResponse, error) {
	t.Helper()
	tok, err := pki.ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(pki.JoinConfig(tok.Digest, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return pb.NewClusterClient(conn).Join(ctx, &pb.JoinRequest{Token: token, Csr: csr, NodeId: id, Address: advertise, Role: role, Protocol: Protocol})
}

// membership is what a join could change: Nodes, certificate records and
// Raft members, each with its version.
func membership(t *testing.T, st *store.Store) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	nodes, _, err := st.List(legion.KindNode, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range nodes {
		out["node/"+o.GetMetadata().Name] = o.GetMetadata().Version
	}
	cfgs, _, err := st.List(legion.KindConfig, legion.SystemNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cfgs {
		if strings.HasPrefix(o.GetMetadata().Name, pki.NodeCertsPrefix) {
			out["record/"+o.GetMetadata().Name] = o.GetMetadata().Version
		}
	}
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Configuration().Servers {
		out["raft/"+string(m.ID)] = 0
	}
	return out
}

// registerAs registers a Node through the manager's dispatcher with creds.
func registerAs(t *testing.T, addr string, creds *pki.Credentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data, _ := json.Marshal(legion.NodeStatus{Addr: "203.0.113.6", WireGuard: &legion.WireGuard{PublicKey: "impostor"}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return testpoll.WhileUnavailable(ctx, func() error {
		_, err := pb.NewDispatcherClient(conn).Register(ctx, &pb.RegisterRequest{Status: data})
		return err
	})
}

// tokensOf is a one-manager cluster and its worker and manager join
// tokens.
func tokensOf(t *testing.T) (m *manager, workerTok, managerTok string) {
	t.Helper()
	m = newManager(t)
	t.Cleanup(m.stop)
	admin := initCluster(t, m)
	var err error
	if workerTok, err = admin.Token(context.Background(), "worker"); err != nil {
		t.Fatal(err)
	}
	if managerTok, err = admin.Token(context.Background(), "manager"); err != nil {
		t.Fatal(err)
	}
	return m, workerTok, managerTok
}

// A join token obtains no existing node's name, nor a malformed one: each
// such join is refused with the reason, no certificate is issued and
// nothing is written. A free, well-formed id joins.
func TestJoinRefusesTakenAndMalformedIDs(t *testing.T) {
	t.Parallel()
	m, workerTok, managerTok := tokensOf(t)
	ctx := context.Background()
	w := newManager(t)
	defer w.stop()
	if _, err := w.bare().JoinCluster(ctx, workerTok, m.addr, ""); err != nil {
		t.Fatal(err)
	}
	if err := registerAs(t, m.addr, w.s.Credentials()); err != nil {
		t.Fatalf("the worker registering: %v", err)
	}
	// The node of `legion up` is named after its host and never joined.
	host := &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode, Metadata: legion.Metadata{Name: "build-host"}}}
	if _, _, err := m.s.Store().Put(ctx, host, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := membership(t, m.s.Store())

	cases := []struct {
		name, id, token, role string
		code                  codes.Code
		says                  string
	}{
		{"a worker's id", w.s.NodeID(), workerTok, "", codes.AlreadyExists, "in use by an existing node"},
		{"a manager's id", m.s.NodeID(), workerTok, "", codes.AlreadyExists, "in use by a manager"},
		{"a manager's id, as a manager", m.s.NodeID(), managerTok, "manager", codes.AlreadyExists, "in use by a manager"},
		{"a host node's name", "build-host", workerTok, "", codes.AlreadyExists, "in use by an existing node"},
		{"admin", "admin", workerTok, "", codes.InvalidArgument, "reserved"},
		{"a path", "../../etc/x", workerTok, "", codes.InvalidArgument, "is not allowed"},
		{"5000 characters", strings.Repeat("a", 5000), workerTok, "", codes.InvalidArgument, "5000 characters, at most 53 allowed"},
		{"empty", "", workerTok, "", codes.InvalidArgument, "missing"},
		{"upper case", "Node1", workerTok, "", codes.InvalidArgument, "is not allowed"},
	}
	for _, tc := range cases {
		resp, err := joinRaw(t, m.addr, tc.token, tc.id, tc.role, testaddr.Loopback(t))
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), "node_id") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("join with %s: %v, want %s naming node_id and saying %q", tc.name, err, tc.code, tc.says)
		}
		if resp != nil {
			t.Errorf("join with %s: a certificate was handed out", tc.name)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("join with %s: a refusal of %d characters", tc.name, len(err.Error()))
		}
	}
	if diff := cmp.Diff(before, membership(t, m.s.Store())); diff != "" {
		t.Errorf("refused joins changed the membership (-before +after):\n%s", diff)
	}

	resp, err := joinRaw(t, m.addr, workerTok, "fresh-1", "", "")
	if err != nil {
		t.Fatalf("join with a free id: %v", err)
	}
	cert, err := pki.ParseCert(resp.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if id := pki.IdentityOf(cert); id.Name != "fresh-1" || id.Role != pki.RoleWorker {
		t.Errorf("the free id's certificate names %+v", id)
	}
	if _, ok := membership(t, m.s.Store())["record/"+pki.NodeCertsConfig("fresh-1")]; !ok {
		t.Error("no record of the certificate issued to fresh-1")
	}
	if _, err := joinRaw(t, m.addr, workerTok, "fresh-1", "", ""); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a second join as fresh-1: %v, want AlreadyExists", err)
	}
}

// A node whose join's answer was lost after its certificate was recorded
// (a leader lost during the write, which applied) asks again with the
// same request and is answered; a join under that id with another key,
// or for another role, is still refused, and once the node has
// registered its own key joins no more either.
func TestJoinAskedAgainByItsNodeIsAnswered(t *testing.T) {
	t.Parallel()
	m, workerTok, managerTok := tokensOf(t)
	key, csr := dispatchertest.NewCSR(t, "again-1")
	var certs []*x509.Certificate
	var resp *pb.JoinResponse
	var err error
	for try := 1; try <= 2; try++ {
		if resp, err = joinWith(t, m.addr, workerTok, "again-1", "", "", csr); err != nil {
			t.Fatalf("join %d with the same request: %v", try, err)
		}
		cert, err := pki.ParseCert(resp.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, cert)
	}
	r, _, err := dispatcher.ReadCerts(m.s.Store(), "again-1")
	if err != nil || r == nil || !r.Holds(certs[0]) || !r.Holds(certs[1]) {
		t.Fatalf("the record after two answers: %+v, %v; want both certificates", r, err)
	}
	_, other := dispatchertest.NewCSR(t, "again-1")
	if _, err := joinWith(t, m.addr, workerTok, "again-1", "", "", other); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a join as again-1 with another key: %v, want AlreadyExists", err)
	}
	if _, err := joinWith(t, m.addr, managerTok, "again-1", "manager", testaddr.Loopback(t), csr); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a join as again-1 with its key, as a manager: %v, want AlreadyExists", err)
	}
	// Registered, the node is a member: its own request is refused too.
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := pki.NewCredentials(resp.Certificate, keyPEM, resp.CaCertificate)
	if err != nil {
		t.Fatal(err)
	}
	if err := registerAs(t, m.addr, creds); err != nil {
		t.Fatalf("registering again-1: %v", err)
	}
	if _, err := joinWith(t, m.addr, workerTok, "again-1", "", "", csr); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a join as again-1 after it registered: %v, want AlreadyExists", err)
	}
}

// forge signs a certificate for name with the cluster's CA key, as an
// attacker who got one signed for a name not theirs would hold.
func forge(t *testing.T, dir, name string, role pki.Role) *pki.Credentials {
	t.Helper()
	files, err := pki.LoadNodeFiles(filepath.Join(dir, PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := files.CA()
	if err != nil {
		t.Fatal(err)
	}
	key, csr := dispatchertest.NewCSR(t, name)
	cert, err := ca.Issue(csr, pki.Identity{Name: name, Role: role}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.KeyPEM(key)
	c, err := pki.NewCredentials(cert, keyPEM, ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Through a manager's port, a certificate of a joined worker's or of a
// manager's name that the cluster did not issue them is refused by the
// dispatcher and by sessions; the nodes' own certificates are not.
func TestCertificateNotIssuedToTheNodeIsRefusedOnTheManagersPort(t *testing.T) {
	t.Parallel()
	m, w, _ := joinedPair(t, "worker")
	ctx := context.Background()
	for _, who := range []struct {
		id   string
		role pki.Role
		own  *pki.Credentials
	}{{w.s.NodeID(), pki.RoleWorker, w.s.Credentials()}, {m.s.NodeID(), pki.RoleManager, m.s.Credentials()}} {
		forged := forge(t, m.dir, who.id, who.role)
		if err := registerAs(t, m.addr, forged); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), who.id) {
			t.Errorf("registering as %s with a forged certificate: %v, want PermissionDenied naming it", who.id, err)
		}
		conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(forged.ClientConfig())))
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := pb.NewSessionsClient(conn).Sessions(sctx, &pb.SessionsRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		conn.Close()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), who.id) {
			t.Errorf("a sessions stream as %s with a forged certificate: %v, want PermissionDenied naming it", who.id, err)
		}
		if err := registerAs(t, m.addr, who.own); err != nil {
			t.Errorf("%s registering with its own certificate: %v", who.id, err)
		}
	}
}

// init on a daemon that already belongs to a cluster says so and what to
// do, rather than asking for credentials.
func TestInitOnAMemberSaysWhatItIs(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx := context.Background()
	_, err := m.bare().Init(ctx)
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already a manager of a cluster") ||
		!strings.Contains(err.Error(), filepath.Join(m.dir, AdminFile)) || !strings.Contains(err.Error(), "legion status") {
		t.Errorf("init on an initialised manager: %v", err)
	}
	w := newManager(t)
	defer w.stop()
	join(t, admin, w, "worker", m.addr)
	if _, err := w.bare().Init(ctx); client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already a worker of a cluster") {
		t.Errorf("init on a worker: %v", err)
	}
}

// A manager that follows renews through the leader, which records the
// new certificate (keeping the addresses it serves TLS for) before
// handing it out; the dispatcher then takes it as that manager's.
func TestFollowerManagerRenewsThroughTheLeader(t *testing.T) {
	t.Parallel()
	m, f, _ := joinedPair(t, "manager", shortCerts)
	first := f.s.Credentials().Current().Leaf
	waitFor(t, "the follower's certificate renewed", 15*time.Second, func() bool {
		return serialOf(f.s.Credentials()).Cmp(first.SerialNumber) != 0
	})
	renewed := f.s.Credentials().Current().Leaf
	r, _, err := dispatcher.ReadCerts(m.s.Store(), f.s.NodeID())
	if err != nil || r == nil || !r.Holds(renewed) {
		t.Fatalf("the leader's record of %s: %+v %v, want the renewed certificate in it", f.s.NodeID(), r, err)
	}
	if len(renewed.IPAddresses) == 0 || renewed.IPAddresses[0].String() != "127.0.0.1" {
		t.Errorf("the renewed certificate serves %v, want its loopback address kept", renewed.IPAddresses)
	}
	if err := registerAs(t, m.addr, f.s.Credentials()); err != nil {
		t.Errorf("the follower's dispatcher call on its renewed certificate: %v", err)
	}
}
