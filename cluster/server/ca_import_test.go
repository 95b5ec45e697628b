package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/pki/pkitest"
	"google.golang.org/grpc/codes"
)

// initClusterWith is initCluster with init's options (ranges, a CA).
func initClusterWith(t testing.TB, m *manager, o client.InitOptions) *client.Client {
	t.Helper()
	if _, err := m.bare().InitWith(context.Background(), o); err != nil {
		t.Fatalf("init: %v", err)
	}
	return adminClient(t, m.addr, m.dir)
}

// orgCA is a CA of an organisation's PKI as an operator brings it: an
// intermediate under the organisation's root, which the cluster is not
// given.
func orgCA(t *testing.T, name string) *pkitest.CA {
	t.Helper()
	root := pkitest.NewCA(t, pkitest.Options{Name: "example root"})
	return pkitest.NewCA(t, pkitest.Options{Name: name, Parent: root})
}

// issuedUnder checks that the certificate in file (the first of a PEM
// bundle) was issued by ca, and that the file's CA is ca.
func issuedUnder(t *testing.T, what, certFile, caFile string, ca *pkitest.CA) {
	t.Helper()
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	if !pki.IssuedBy(leaf, ca.Cert) {
		t.Errorf("%s: issued by %q, want the imported CA", what, leaf.Issuer)
	}
	if caFile == "" {
		return
	}
	caData, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := pki.ParseCert(caData); err != nil || !held.Equal(ca.Cert) {
		t.Errorf("%s: the CA held is not the imported one (%v)", what, err)
	}
}

// Init with a CA of the operator's own (an intermediate): the CA given
// only in part, or with another's key, is refused and leaves the daemon
// fresh; taken, it is the cluster's root: admin.pem, the join tokens'
// digest, the managers' ca.crt and ca.key (sealed under autolock as a CA
// key init made) and the certificates of the nodes that join.
func TestInitWithImportedCA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ca := orgCA(t, "legion at example")
	m := newManager(t)
	t.Cleanup(m.stop)
	for _, c := range []struct {
		o    client.InitOptions
		want string
	}{
		{client.InitOptions{CACert: ca.CertPEM()}, "CA certificate given without its key"},
		{client.InitOptions{CAKey: ca.KeyPEM(t)}, "CA key given without its certificate"},
		{client.InitOptions{CACert: ca.CertPEM(), CAKey: pkitest.NewCA(t, pkitest.Options{}).KeyPEM(t)}, "CA key: the key does not match the certificate"},
	} {
		_, err := m.bare().InitWith(ctx, c.o)
		if client.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("init refused with %v, want InvalidArgument %q", err, c.want)
		}
	}
	admin := initClusterWith(t, m, client.InitOptions{CACert: ca.CertPEM(), CAKey: ca.KeyPEM(t)})
	pkiDir := filepath.Join(m.dir, PKIDir)
	issuedUnder(t, "admin.pem", filepath.Join(m.dir, AdminFile), "", ca)
	creds, err := pki.LoadBundle(filepath.Join(m.dir, AdminFile))
	if err != nil {
		t.Fatal(err)
	}
	if !creds.CA.Equal(ca.Cert) || creds.ID.Role != pki.RoleAdmin {
		t.Errorf("admin.pem: %s of CA %q, want the admin of the imported CA", creds.ID.Role, creds.CA.Subject)
	}
	issuedUnder(t, "the first manager", filepath.Join(pkiDir, pki.NodeCertFile), filepath.Join(pkiDir, pki.CACertFile), ca)
	keyPEM, err := os.ReadFile(filepath.Join(pkiDir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := pki.ParseKey(keyPEM); err != nil || !k.Equal(ca.Key) {
		t.Errorf("pki/ca.key is not the imported key (%v)", err)
	}
	if _, err := admin.Status(ctx); err != nil {
		t.Fatalf("the admin of the imported CA: %v", err)
	}
	tok, err := admin.Token(ctx, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if parsed, err := pki.ParseToken(tok); err != nil || parsed.Digest != pki.Digest(ca.Cert) {
		t.Errorf("the join token %s names another CA than the imported one (%v)", tok, err)
	}
	// A manager and a worker join, checking the CA against the token's
	// digest; both are issued under the imported CA, and the manager
	// holds its key.
	f := newManager(t)
	t.Cleanup(f.stop)
	join(t, admin, f, "manager", m.addr)
	fDir := filepath.Join(f.dir, PKIDir)
	issuedUnder(t, "the joined manager", filepath.Join(fDir, pki.NodeCertFile), filepath.Join(fDir, pki.CACertFile), ca)
	if data, err := os.ReadFile(filepath.Join(fDir, pki.CAKeyFile)); err != nil {
		t.Errorf("the joined manager holds no CA key: %v", err)
	} else if k, err := pki.ParseKey(data); err != nil || !k.Equal(ca.Key) {
		t.Errorf("the joined manager's ca.key is not the imported key (%v)", err)
	}
	w := newManager(t)
	t.Cleanup(w.stop)
	join(t, admin, w, "worker", f.addr)
	wDir := filepath.Join(w.dir, PKIDir)
	issuedUnder(t, "the joined worker", filepath.Join(wDir, pki.NodeCertFile), filepath.Join(wDir, pki.CACertFile), ca)
	if err := registerAs(t, m.addr, w.s.Credentials()); err != nil {
		t.Errorf("the worker's dispatcher call: %v", err)
	}
	// Autolock seals the imported key as it seals one init made.
	al, err := admin.Autolock(ctx, client.AutolockEnable)
	if err != nil || al.LeaderKeys != "" {
		t.Fatalf("autolock enable: %v %s", err, al.LeaderKeys)
	}
	unlock, err := pki.ParseUnlockKey(al.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaderDir := pkiDir
	if !m.s.store().IsLeader() {
		leaderDir = fDir
	}
	sealed, err := os.ReadFile(filepath.Join(leaderDir, pki.CAKeyFile+pki.SealedSuffix))
	if err != nil {
		t.Fatalf("the leader's CA key is not sealed: %v", err)
	}
	clear, err := pki.OpenKey(unlock, pki.CAKeyFile, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := pki.ParseKey(clear); err != nil || !k.Equal(ca.Key) {
		t.Errorf("the sealed CA key is not the imported key (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(leaderDir, pki.CAKeyFile)); err == nil {
		t.Error("the CA key stays in the clear beside its sealed form")
	}
}

// legion ca rotate --ca-cert --ca-key: the rotation goes to the CA given
// (an intermediate), refused when only in part or with the current CA's
// key; every node renews under it, admin.pem too, and the rotation ends.
func TestRotateCAToImportedCA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	renewFast := func(c *Config) { c.RenewCheck = 100 * time.Millisecond }
	m, w, admin := joinedPair(t, "worker", renewFast)
	for _, c := range []struct {
		cert, key []byte
		want      string
	}{
		{orgCA(t, "x").CertPEM(), nil, "CA certificate given without its key"},
		{m.s.caNow().CertPEM(), mustCAKey(t, m), "its key is the current CA's: a rotation needs a new key"},
	} {
		_, err := admin.RotateCATo(ctx, c.cert, c.key)
		if client.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rotation refused with %v, want InvalidArgument %q", err, c.want)
		}
	}
	ca := orgCA(t, "legion at example, 2")
	r, err := admin.RotateCATo(ctx, ca.CertPEM(), ca.KeyPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Started || r.Digest != pki.Digest(ca.Cert) {
		t.Fatalf("rotation %+v, want one started to the imported CA %s", r, pki.Digest(ca.Cert))
	}
	waitFor(t, "the rotation to end", 30*time.Second, func() bool {
		st, err := adminClient(t, m.addr, m.dir).RotateCA(ctx, true)
		return err == nil && st.PreviousDigest == "" && st.Digest == pki.Digest(ca.Cert)
	})
	pkiDir := filepath.Join(m.dir, PKIDir)
	issuedUnder(t, "the manager", filepath.Join(pkiDir, pki.NodeCertFile), filepath.Join(pkiDir, pki.CACertFile), ca)
	issuedUnder(t, "admin.pem", filepath.Join(m.dir, AdminFile), "", ca)
	wDir := filepath.Join(w.dir, PKIDir)
	issuedUnder(t, "the worker", filepath.Join(wDir, pki.NodeCertFile), filepath.Join(wDir, pki.CACertFile), ca)
	if err := registerAs(t, m.addr, w.s.Credentials()); err != nil {
		t.Errorf("the worker's dispatcher call after the rotation: %v", err)
	}
}

func mustCAKey(t *testing.T, m *manager) []byte {
	t.Helper()
	k, err := m.s.caNow().KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
