// Package dispatchertest runs a real Dispatcher for tests: a one-manager
// store on an in-memory Raft transport, a cluster CA, and the service on a
// loopback gRPC port with mutual TLS. Tests only.
package dispatchertest

import (
	"context"
	"crypto/ecdsa"
	"net"
	"sync"
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
	stop    func()
}

// Stop stops the manager's gRPC server (the store stays open): its
// address goes dead, as a manager's that crashed.
func (m *Manager) Stop() { m.stop() }

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
	c, _ := Issue(t, ca, name, role)
	return c
}

// Issue issues a certificate of the CA for name in role (valid for
// 127.0.0.1), and returns it as credentials and as a PEM bundle
// (certificate, key, CA) such as admin.pem.
func Issue(t testing.TB, ca *pki.CA, name string, role pki.Role) (*pki.Credentials, []byte) {
	t.Helper()
	key, csr := NewCSR(t, name)
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
	return c, pki.Bundle(cert, keyPEM, ca.CertPEM())
}

// NewCSR makes a fresh key and a certificate request for name signed
// with it.
func NewCSR(t testing.TB, name string) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.CSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return key, csr
}

// Record records creds' certificate for the node it names, as a join
// does, so the dispatcher and the sessions service take it as that node's
// (and no other certificate naming the node).
func Record(t testing.TB, st *store.Store, creds *pki.Credentials) {
	t.Helper()
	if err := dispatcher.RecordCert(context.Background(), st, creds.Cert.Leaf, false); err != nil {
		t.Fatal(err)
	}
}

// OpenStore opens a one-manager store and waits until it leads.
func OpenStore(t testing.TB) *store.Store {
	t.Helper()
	_, tr := raft.NewInmemTransport("m1")
	st, err := store.Open(store.Config{Dir: t.TempDir(), ID: "m1", Transport: tr, WriteTimeout: 5 * time.Second, Timing: store.FastTiming()})
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

// Listen opens a loopback listener for Serve, so a test knows every
// manager's address before any serves.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// OpenPair opens two managers' stores in one Raft cluster (in-memory
// transport; Raft addresses "m1" and "m2") and returns the leader's and
// the follower's once the follower has the leader's state.
func OpenPair(t testing.TB) (leader, follower *store.Store) {
	t.Helper()
	var sts []*store.Store
	var trs []*raft.InmemTransport
	for _, id := range []string{"m1", "m2"} {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		st, err := store.Open(store.Config{Dir: t.TempDir(), ID: id, Transport: tr, WriteTimeout: 5 * time.Second, Timing: store.FastTiming()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sts, trs = append(sts, st), append(trs, tr)
	}
	trs[0].Connect("m2", trs[1])
	trs[1].Connect("m1", trs[0])
	if err := sts[0].Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	Poll(t, "leadership", 10*time.Second, sts[0].IsLeader)
	if err := sts[0].Raft().AddVoter("m2", "m2", 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	Poll(t, "the follower catching up", 10*time.Second, func() bool {
		return sts[1].AppliedIndex() >= sts[0].AppliedIndex()
	})
	return sts[0], sts[1]
}

// Serve runs a Dispatcher over st on lis (nil: a new loopback port) with
// mutual TLS; a nil peers makes it name itself as the only manager and
// the leader.
func Serve(t testing.TB, ca *pki.CA, st *store.Store, lis net.Listener, peers dispatcher.Peers) *Manager {
	t.Helper()
	return ServeWith(t, ca, dispatcher.Fixed(st), lis, dispatcher.Options{Peers: peers})
}

// ServeWith runs a Dispatcher over whatever store src gives, with o (its
// Peers as Serve's when nil), on a gRPC server with opts besides its
// credentials (interceptors that watch what it is sent, say).
func ServeWith(t testing.TB, ca *pki.CA, src dispatcher.Source, lis net.Listener, o dispatcher.Options, opts ...grpc.ServerOption) *Manager {
	t.Helper()
	if lis == nil {
		lis = Listen(t)
	}
	addr := lis.Addr().String()
	if o.Peers == nil {
		o.Peers = func() (string, []string) { return addr, []string{addr} }
	}
	svc := dispatcher.New(src, o)
	st := src.Store()
	creds := Credentials(t, ca, "m1", pki.RoleManager)
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(creds.ServerConfig()))}, opts...)...)
	svc.RegisterOn(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	var once sync.Once
	stop := func() { once.Do(func() { g.Stop(); <-served }) }
	t.Cleanup(stop)
	return &Manager{CA: ca, Store: st, Service: svc, Addr: addr, stop: stop}
}

// Start runs a one-manager cluster's Dispatcher.
func Start(t testing.TB) *Manager {
	t.Helper()
	return Serve(t, NewCA(t), OpenStore(t), nil, nil)
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
