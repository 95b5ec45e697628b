package pki

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func issue(t *testing.T, ca *CA, id Identity) *Credentials {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := CSR(key, "ignored-name")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(csr, id, []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := KeyPEM(key)
	c, err := NewCredentials(cert, kp, ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIssueNamesTheIdentityTheCAChooses(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	c := issue(t, ca, Identity{Name: "node-1", Role: RoleManager})
	if diff := cmp.Diff(Identity{Name: "node-1", Role: RoleManager}, c.ID); diff != "" {
		t.Fatalf("identity (-want +got):\n%s", diff)
	}
	// The certificate's times are whole seconds and issue reads the clock
	// after now: its end may fall up to a second past now's.
	life := c.Cert.Leaf.NotAfter.Sub(now)
	if life < CertLifetime-2*time.Minute || life > CertLifetime+time.Second {
		t.Fatalf("lifetime %s, want 90 days", life)
	}
	if len(c.Cert.Leaf.IPAddresses) != 1 || c.Cert.Leaf.DNSNames[0] != "localhost" {
		t.Fatalf("hosts: %v %v", c.Cert.Leaf.IPAddresses, c.Cert.Leaf.DNSNames)
	}
	if _, err := (&CA{Cert: ca.Cert}).Issue(nil, Identity{}, nil, now); err == nil {
		t.Fatal("a CA without its key issued")
	}
	if _, err := ca.Issue([]byte("junk"), Identity{}, nil, now); err == nil {
		t.Fatal("junk request issued")
	}
}

func TestTokenRoundTripAndRefusals(t *testing.T) {
	ca, _ := NewCA(time.Now())
	tok := Token{Digest: Digest(ca.Cert), Secret: NewSecret()}
	got, err := ParseToken(tok.String())
	if err != nil || got != tok {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"", "LGN-2-x-y", "LGN-1-short-secret", "LGN-1-" + tok.Digest, "LGN-1-" + tok.Digest + "-"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	if !SecretMatches(tok.Secret, tok.Secret) || SecretMatches(tok.Secret, NewSecret()) {
		t.Fatal("secret comparison")
	}
}

// handshake runs a TLS handshake between the configurations over a pipe.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, server)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3: a client certificate failure shows on the first read.
			_, err = s.Read(make([]byte, 1))
		}
		a.Close()
		done <- err
	}()
	c := tls.Client(b, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		c.Write([]byte("x"))
	}
	b.Close()
	return <-done, clientErr
}

func TestMutualTLSAcceptsTheClusterAndRefusesOthers(t *testing.T) {
	ca, _ := NewCA(time.Now())
	other, _ := NewCA(time.Now())
	server := issue(t, ca, Identity{Name: "m1", Role: RoleManager})
	admin := issue(t, ca, Identity{Name: "admin", Role: RoleAdmin})
	stranger := issue(t, other, Identity{Name: "admin", Role: RoleAdmin})

	if se, ce := handshake(t, server.ServerConfig(), admin.ClientConfig()); se != nil || ce != nil {
		t.Fatalf("cluster admin refused: %v / %v", se, ce)
	}
	if se, _ := handshake(t, server.ServerConfig(), stranger.ClientConfig()); se == nil {
		t.Fatal("certificate of another CA accepted by the server")
	}
	// A client trusting another CA refuses this server.
	if _, ce := handshake(t, server.ServerConfig(), stranger.ClientConfig()); ce == nil || !strings.Contains(ce.Error(), "not from this cluster's CA (a server of another cluster, or this cluster's CA was rotated: a user needs new credentials") {
		t.Fatalf("client of another CA: %v", ce)
	}
	// Join: the digest decides.
	if _, ce := handshake(t, server.ServerConfig(), JoinConfig(Digest(ca.Cert), nil)); ce != nil {
		t.Fatalf("join with the right digest: %v", ce)
	}
	if _, ce := handshake(t, server.ServerConfig(), JoinConfig(Digest(other.Cert), nil)); ce == nil || !strings.Contains(ce.Error(), "not the cluster the token is for") {
		t.Fatalf("join with a wrong digest: %v", ce)
	}
}

func TestNodeFilesAndBundle(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadNodeFiles(dir); err != ErrNoPKI {
		t.Fatalf("empty dir: %v", err)
	}
	ca, _ := NewCA(time.Now())
	key, _ := NewKey()
	csr, _ := CSR(key, "x")
	cert, _ := ca.Issue(csr, Identity{Name: "admin", Role: RoleAdmin}, nil, time.Now())
	kp, _ := KeyPEM(key)
	cak, _ := ca.KeyPEM()
	f := &NodeFiles{CACert: ca.CertPEM(), CAKey: cak, Cert: cert, Key: kp}
	if err := f.Save(dir); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, NodeKeyFile))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode())
	}
	g, err := LoadNodeFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, g); diff != "" {
		t.Fatalf("files (-saved +loaded):\n%s", diff)
	}
	p := filepath.Join(dir, "admin.pem")
	if err := WriteFile(p, Bundle(cert, kp, ca.CertPEM())); err != nil {
		t.Fatal(err)
	}
	c, err := LoadBundle(p)
	if err != nil || c.ID.Role != RoleAdmin {
		t.Fatalf("bundle: %+v %v", c, err)
	}
}

func FuzzParseToken(f *testing.F) {
	ca, _ := NewCA(time.Now())
	f.Add(Token{Digest: Digest(ca.Cert), Secret: NewSecret()}.String())
	f.Add("LGN-1-x-y")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		again, err := ParseToken(tok.String())
		if err != nil || again != tok {
			t.Fatalf("%q parsed as %+v, which does not round-trip: %+v %v", s, tok, again, err)
		}
	})
}
