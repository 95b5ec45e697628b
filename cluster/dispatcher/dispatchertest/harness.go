// Package dispatchertest runs a real Dispatcher for tests: a one-manager
// store on an in-memory Raft transport, a cluster CA, and the service on a
// loopback gRPC port with mutual TLS. Tests only.
package dispatchertest

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Manager is one running manager: its store and its Dispatcher.
type Manager struct {
	CA      *pki.CA
	Store   *store.Store
	Service *dispatcher.Service
	Addr    string // the Dispatcher's loopback address
}

// Timing is a fast Raft timing for tests.
func Timing() store.Timing {
	return store.Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour, TrailingLogs: 1024}
}

// NewCA makes a cluster CA.
func NewCA(t testing.TB) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Credentials issues a certificate of the CA for name in role.
func Credentials(t testing.TB, ca *pki.CA, name string, role pki.Role) *pki.Credentials {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.CSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(csr, pki.Identity{Name: name, Role: role}, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.NewCredentials(cert, keyPEM, ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// OpenStore opens a one-manager store and waits until it leads.
func OpenStore(t testing.TB) *store.Store {
	t.Helper()
	_, tr := raft.NewInmemTransport("m1")
	st, err := store.Open(store.Config{Dir: t.TempDir(), ID: "m1", Transport: tr, WriteTimeout: 5 * time.Second, Timing: Timing()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	Poll(t, "leadership", 10*time.Second, st.IsLeader)
	return st
}

// Serve runs a Dispatcher over st on a loopback port with mutual TLS; a
// nil peers makes it name itself as the only manager and the leader.
func Serve(t testing.TB, ca *pki.CA, st *store.Store, peers dispatcher.Peers) *Manager {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if peers == nil {
		peers = func() (string, []string) { return addr, []string{addr} }
	}
	svc := dispatcher.New(st, dispatcher.Options{Peers: peers})
	creds := Credentials(t, ca, "m1", pki.RoleManager)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(creds.ServerConfig())))
	svc.RegisterOn(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-served })
	return &Manager{CA: ca, Store: st, Service: svc, Addr: addr}
}

// Start runs a one-manager cluster's Dispatcher.
func Start(t testing.TB) *Manager {
	t.Helper()
	return Serve(t, NewCA(t), OpenStore(t), nil)
}

// DeadAddr is a loopback address nothing listens on.
func DeadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// Poll waits until cond holds, failing the test after d.
func Poll(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for the condition
	}
}
