package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// Credentials are a certificate with its key and the CA that verifies
// peers.
type Credentials struct {
	Cert tls.Certificate // as first loaded; Current is what is presented
	CA   *x509.Certificate
	Pool *x509.CertPool
	ID   Identity

	renewed atomic.Pointer[tls.Certificate]
	// trust, once SetAuthority ran, replaces CA and Pool (a CA rotation).
	trust atomic.Pointer[authority]
	// rotated is a CA newer than the one the certificate came from, seen
	// in a manager's verified chain: the cluster's CA is rotating.
	rotated atomic.Pointer[x509.Certificate]
}

// auth is what the credentials trust and present now.
func (c *Credentials) auth() *authority {
	if a := c.trust.Load(); a != nil {
		return a
	}
	a := &authority{current: c.CA, pool: c.Pool}
	if c.CA != nil {
		a.chain = [][]byte{c.CA.Raw}
	}
	return a
}

// Authority is the CA the node's certificates come from now.
func (c *Credentials) Authority() *x509.Certificate { return c.auth().current }

// SetAuthority replaces what the node trusts and presents after its
// certificate, from a ca.crt (AuthorityPEM): a CA rotation needs no
// restart either.
func (c *Credentials) SetAuthority(caPEM []byte) error {
	a, err := parseAuthority(caPEM)
	if err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	c.trust.Store(a)
	cur := *c.Current()
	cur.Certificate = append([][]byte{cur.Certificate[0]}, a.chain...)
	c.renewed.Store(&cur)
	if r := c.rotated.Load(); r != nil && r.Equal(a.current) {
		c.rotated.Store(nil)
	}
	return nil
}

// RotationSeen is a CA a manager presented that the node's certificate
// does not come from, verified through the cross-signed copy the
// manager presented with it: the node should renew under it. Nil when
// none was seen.
func (c *Credentials) RotationSeen() *x509.Certificate {
	r := c.rotated.Load()
	if r == nil || IssuedBy(c.Current().Leaf, r) {
		return nil
	}
	return r
}

// Current is the certificate presented now: the renewed one once Renew
// ran. Configurations made by ServerConfig and ClientConfig read it at
// each handshake, so a renewal needs no restart and open connections
// carry on.
func (c *Credentials) Current() *tls.Certificate {
	if r := c.renewed.Load(); r != nil {
		return r
	}
	return &c.Cert
}

// Renew presents a new certificate and key from the next handshake on. It
// must name the same holder and chain to a CA the node trusts; caPEM,
// when given, is what the node trusts from then on (SetAuthority), for a
// certificate renewed under a rotated CA.
func (c *Credentials) Renew(certPEM, keyPEM []byte, caPEM ...[]byte) error {
	a := c.auth()
	if len(caPEM) > 0 && len(caPEM[0]) > 0 {
		var err error
		if a, err = parseAuthority(caPEM[0]); err != nil {
			return fmt.Errorf("CA certificates: %w", err)
		}
	}
	n, err := NewCredentials(certPEM, keyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.current.Raw}))
	if err != nil {
		return err
	}
	if n.ID != c.ID {
		return fmt.Errorf("renewed certificate names %s (%s), expected %s (%s)", n.ID.Name, n.ID.Role, c.ID.Name, c.ID.Role)
	}
	if err := verifyChain(n.Cert.Certificate, a.pool); err != nil {
		return fmt.Errorf("renewed certificate: %w", err)
	}
	n.Cert.Certificate = append([][]byte{n.Cert.Certificate[0]}, a.chain...)
	if a != c.auth() {
		c.trust.Store(a)
	}
	c.renewed.Store(&n.Cert)
	return nil
}

// NewCredentials assembles credentials from PEM: the certificate, its
// key and the CA certificate.
func NewCredentials(certPEM, keyPEM, caPEM []byte) (*Credentials, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}
	a, err := parseAuthority(caPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	pair.Leaf = leaf
	// Present the chain with the CA last, so a joining node can read the
	// CA from the handshake and check it against its token's digest;
	// while the CA rotates, its cross-signed copy comes before it.
	pair.Certificate = append(pair.Certificate[:1], a.chain...)
	c := &Credentials{Cert: pair, CA: a.current, Pool: a.pool, ID: IdentityOf(leaf)}
	c.trust.Store(a)
	return c, nil
}

// Bundle encodes credentials as one PEM file (certificate, key, CA), the
// form of admin.pem.
func Bundle(certPEM, keyPEM, caPEM []byte) []byte {
	out := append([]byte{}, certPEM...)
	out = append(out, keyPEM...)
	return append(out, caPEM...)
}

// LoadBundle reads a PEM bundle: the first certificate is the holder's,
// the others the CA's (AuthorityPEM: while the CA rotates, the new one,
// its cross-signed copy and the old one).
func LoadBundle(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	certs, key := splitPEM(data)
	if len(certs) < 2 || key == nil {
		return nil, fmt.Errorf("credentials %s: expected a certificate, its key and the CA certificate", path)
	}
	c, err := NewCredentials(certs[0], key, bytes.Join(certs[1:], nil))
	if err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	return c, nil
}

// ServerConfig is the TLS configuration of a manager's port. Client
// certificates are verified when given; the API itself refuses callers
// without one, except the join call, which a token authenticates.
func (c *Credentials) ServerConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.Current(), nil },
		ClientCAs:      c.auth().pool,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		MinVersion:     tls.VersionTLS13,
	}
}

// ClientConfig is the TLS configuration of a caller: it presents its
// certificate and verifies the server's against the CA. Names are not
// checked (managers are reached by any of their addresses); the chain to
// the cluster's CA is.
func (c *Credentials) ClientConfig() *tls.Config {
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.Current(), nil },
		MinVersion:           tls.VersionTLS13,
		InsecureSkipVerify:   true, // replaced by VerifyPeerCertificate below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if err := verifyManager(raw, c.auth().pool); err != nil {
				return err
			}
			c.noteRotation(raw)
			return nil
		},
	}
}

// noteRotation remembers the CA a verified server chain ends with when
// the node's certificate does not come from it and the chain holds its
// cross-signed copy: the server renewed under a rotated CA.
func (c *Credentials) noteRotation(raw [][]byte) {
	if len(raw) < 3 {
		return
	}
	last, err := x509.ParseCertificate(raw[len(raw)-1])
	// The new CA need not be self-signed (one imported may be an
	// intermediate): what vouches for it is its cross-signed copy, which
	// names it and holds its key.
	if err != nil || IssuedBy(c.Current().Leaf, last) || !last.BasicConstraintsValid || !last.IsCA {
		return
	}
	for _, r := range raw[1 : len(raw)-1] {
		if x, err := x509.ParseCertificate(r); err == nil && bytes.Equal(x.RawSubjectPublicKeyInfo, last.RawSubjectPublicKeyInfo) &&
			bytes.Equal(x.RawSubject, last.RawSubject) && c.auth().verifies(x) {
			c.rotated.Store(last)
			return
		}
	}
}

// Trusts reports whether a peer's certificates, as it presented them in
// a handshake (its own first, then what it sent with it), still chain to
// a CA these credentials trust: once a CA rotation ends, a connection
// opened with a certificate of the old CA no longer does.
func (c *Credentials) Trusts(peer []*x509.Certificate) bool {
	if len(peer) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, x := range peer[1:] {
		inter.AddCert(x)
	}
	_, err := peer[0].Verify(x509.VerifyOptions{Roots: c.auth().pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// verifies reports whether a CA certificate chains to a trusted root.
func (a *authority) verifies(x *x509.Certificate) bool {
	_, err := x.Verify(x509.VerifyOptions{Roots: a.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

func verifyChain(raw [][]byte, pool *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	// What follows the leaf may be a rotated CA's cross-signed copy.
	inter := x509.NewCertPool()
	for _, r := range raw[1:] {
		if x, err := x509.ParseCertificate(r); err == nil {
			inter.AddCert(x)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		if leaf.Subject.CommonName == LockedCommonName {
			return ErrManagerLocked
		}
		// Another cluster's server, or this one's after a CA rotation
		// that these credentials were not renewed in: say what to do
		// of the second, which the error alone does not suggest.
		return fmt.Errorf("the server's certificate is not from this cluster's CA (a server of another cluster, or this cluster's CA was rotated: "+
			"a user needs new credentials from legion user create, a node to join again): %w", err)
	}
	return nil
}

// verifyManager checks a server's chain, then that its certificate is a
// manager's. Every certificate the CA signs may serve TLS, so the chain
// alone would let any holder of one (a worker, a user) pose as a manager
// to clients and agents, and take what they send: Secrets, a join token.
func verifyManager(raw [][]byte, pool *x509.CertPool) error {
	if err := verifyChain(raw, pool); err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	if id := IdentityOf(leaf); id.Role != RoleManager {
		return fmt.Errorf("%w: the server's certificate is %s %q's, not a manager's (only managers serve the API: point --server at a manager)", ErrNotManager, id.Role, id.Name)
	}
	return nil
}

// ErrNotManager: the server's certificate is of this cluster, but not a
// manager's.
var ErrNotManager = errors.New("not a manager")

// JoinConfig is the TLS configuration of a node joining with a token: it
// has no certificate yet, reads the CA from the server's chain and checks
// it against the token's digest before the handshake completes, so
// nothing is sent to a server of another cluster.
func JoinConfig(digest string, got func(*x509.Certificate)) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the digest check below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) < 2 {
				return errors.New("join: the server presented no CA certificate")
			}
			ca, err := x509.ParseCertificate(raw[len(raw)-1])
			if err != nil {
				return fmt.Errorf("join: server CA: %w", err)
			}
			if d := Digest(ca); d != digest {
				return fmt.Errorf("join: the server's CA has digest %s, the token names %s: not the cluster the token is for", d, digest)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			if err := verifyManager(raw, pool); err != nil {
				return fmt.Errorf("join: %w", err)
			}
			if got != nil {
				got(ca)
			}
			return nil
		},
	}
}

// splitPEM returns a bundle's certificates and its key, each as PEM.
func splitPEM(data []byte) (certs [][]byte, key []byte) {
	for {
		var b *pemBlock
		b, data = nextPEM(data)
		if b == nil {
			return
		}
		switch b.typ {
		case "CERTIFICATE":
			certs = append(certs, b.raw)
		case "EC PRIVATE KEY":
			key = b.raw
		}
	}
}

// WriteFile writes a file with mode 0600, making its directory (0700).
func WriteFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
