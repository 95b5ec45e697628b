package server

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	"google.golang.org/grpc/credentials"
)

// rotating is a manager's credentials in the middle of a CA rotation
// (issued under the new CA, trusting both), and two users' TLS
// certificates, one under each CA.
func rotating(t *testing.T) (mgr *pki.Credentials, next *pki.CA, old, renewed tls.Certificate) {
	t.Helper()
	now := time.Now()
	prev, err := pki.NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	next, cross, err := prev.Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.CA, id pki.Identity, authority []byte) *pki.Credentials {
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		csr, err := pki.CSR(key, id.Name)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := ca.Issue(csr, id, []string{"127.0.0.1"}, now)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, err := pki.KeyPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pki.NewCredentials(cert, keyPEM, authority)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mgr = issue(next, pki.Identity{Name: "m1", Role: pki.RoleManager}, pki.AuthorityPEM(next.Cert, cross, prev.Cert))
	old = *issue(prev, pki.Identity{Name: "ann", Role: pki.RoleUser}, prev.CertPEM()).Current()
	renewed = *issue(next, pki.Identity{Name: "bob", Role: pki.RoleUser}, next.CertPEM()).Current()
	return mgr, next, old, renewed
}

// handshake connects a client presenting cert (none when nil) to tc over
// loopback; it returns both ends and the server's handshake error.
func handshake(t *testing.T, tc credentials.TransportCredentials, cert *tls.Certificate) (client, server net.Conn, err error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	done := make(chan error, 1)
	go func() {
		a, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			done <- err
			return
		}
		t.Cleanup(func() { a.Close() })
		c := tls.Client(a, cfg)
		client = c
		done <- c.Handshake()
	}()
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	server, _, err = tc.ServerHandshake(b)
	if err != nil {
		b.Close() // the client's handshake ends with it
	}
	<-done
	return client, server, err
}

// Connections of a certificate no longer trusted are closed by a cut,
// the others left open; connections without a certificate are not held;
// and a handshake that verified its peer against what was trusted before
// a cut running meanwhile is refused when it ends.
func TestPeerConnsCutWhatIsNoLongerTrusted(t *testing.T) {
	t.Parallel()
	mgr, next, old, renewed := rotating(t)
	var p peerConns
	tc := trackedCreds{TransportCredentials: credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := mgr.ServerConfig()
			c.NextProtos = []string{"h2"}
			return c, nil
		}}), conns: &p, trusts: mgr.Trusts}

	oldClient, oldServer, err := handshake(t, tc, &old)
	if err != nil {
		t.Fatalf("while rotating, a certificate of the old CA: %v", err)
	}
	newClient, newServer, err := handshake(t, tc, &renewed)
	if err != nil {
		t.Fatalf("a certificate of the new CA: %v", err)
	}
	if _, _, err := handshake(t, tc, nil); err != nil {
		t.Fatalf("no certificate: %v", err)
	}
	if n := p.count(); n != 2 {
		t.Fatalf("%d connections held, want the 2 with a certificate", n)
	}
	if n := p.cut(mgr.Trusts); n != 0 {
		t.Fatalf("a cut with nothing narrowed closed %d connections", n)
	}

	// The rotation ends: the old CA is trusted no more.
	if err := mgr.SetAuthority(pki.AuthorityPEM(next.Cert, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if n := p.cut(mgr.Trusts); n != 1 {
		t.Fatalf("the cut closed %d connections, want the old CA's one", n)
	}
	oldClient.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := oldClient.Read(make([]byte, 1)); err == nil {
		t.Fatal("the old CA's connection still reads after the cut")
	}
	go newClient.Write([]byte("x"))
	newServer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := newServer.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the new CA's connection after the cut: %v", err)
	}
	oldServer.Close() // closing twice is harmless
	newServer.Close()
	if n := p.count(); n != 0 {
		t.Fatalf("%d connections held after they closed, want none", n)
	}

	// A handshake verified against the trust of before a cut that ran
	// meanwhile: refused once it ends.
	mgr2, next2, old2, _ := rotating(t)
	var p2 peerConns
	racing := trackedCreds{TransportCredentials: credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := mgr2.ServerConfig() // what was trusted as the handshake began
			c.NextProtos = []string{"h2"}
			if err := mgr2.SetAuthority(pki.AuthorityPEM(next2.Cert, nil, nil)); err != nil {
				return nil, err
			}
			p2.cut(mgr2.Trusts)
			return c, nil
		}}), conns: &p2, trusts: mgr2.Trusts}
	if _, _, err := handshake(t, racing, &old2); !errors.Is(err, errNoLongerTrusted) {
		t.Fatalf("a handshake across the cut: %v, want %v", err, errNoLongerTrusted)
	}
	if n := p2.count(); n != 0 {
		t.Fatalf("%d connections held after the refused handshake, want none", n)
	}
}
