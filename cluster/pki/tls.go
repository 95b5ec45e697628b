package pki

import (
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
// must name the same holder and chain to the same CA.
func (c *Credentials) Renew(certPEM, keyPEM []byte) error {
	n, err := NewCredentials(certPEM, keyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.CA.Raw}))
	if err != nil {
		return err
	}
	if n.ID != c.ID {
		return fmt.Errorf("renewed certificate names %s (%s), expected %s (%s)", n.ID.Name, n.ID.Role, c.ID.Name, c.ID.Role)
	}
	if err := verifyChain(n.Cert.Certificate, c.Pool); err != nil {
		return fmt.Errorf("renewed certificate: %w", err)
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
	ca, err := ParseCert(caPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	pair.Leaf = leaf
	// Present the chain with the CA, so a joining node can read the CA
	// from the handshake and check it against its token's digest.
	pair.Certificate = append(pair.Certificate, ca.Raw)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &Credentials{Cert: pair, CA: ca, Pool: pool, ID: IdentityOf(leaf)}, nil
}

// Bundle encodes credentials as one PEM file (certificate, key, CA), the
// form of admin.pem.
func Bundle(certPEM, keyPEM, caPEM []byte) []byte {
	out := append([]byte{}, certPEM...)
	out = append(out, keyPEM...)
	return append(out, caPEM...)
}

// LoadBundle reads a PEM bundle: the first certificate is the holder's,
// the last the CA's.
func LoadBundle(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	certs, key := splitPEM(data)
	if len(certs) < 2 || key == nil {
		return nil, fmt.Errorf("credentials %s: expected a certificate, its key and the CA certificate", path)
	}
	c, err := NewCredentials(certs[0], key, certs[len(certs)-1])
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
		ClientCAs:      c.Pool,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		MinVersion:     tls.VersionTLS13,
	}
}

// ClientConfig is the TLS configuration of a caller: it presents its
// certificate and verifies the server's against the CA. Names are not
// checked (managers are reached by any of their addresses); the chain to
// the cluster's CA is.
func (c *Credentials) ClientConfig() *tls.Config {
	pool := c.Pool
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.Current(), nil },
		MinVersion:           tls.VersionTLS13,
		InsecureSkipVerify:   true, // replaced by VerifyPeerCertificate below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyChain(raw, pool)
		},
	}
}

func verifyChain(raw [][]byte, pool *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		if leaf.Subject.CommonName == LockedCommonName {
			return ErrManagerLocked
		}
		return fmt.Errorf("the server's certificate is not from this cluster's CA: %w", err)
	}
	return nil
}

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
			if err := verifyChain(raw, pool); err != nil {
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
