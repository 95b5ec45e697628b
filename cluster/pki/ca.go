package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base32"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Role is what a certificate lets its holder do.
type Role string

// Roles carried by certificates (as the subject's organizational unit).
const (
	RoleManager Role = "manager"
	RoleWorker  Role = "worker"
	RoleAdmin   Role = "admin"
	// RoleUser holds only what RoleBindings give it (package rbac).
	RoleUser Role = "user"
)

// Lifetimes.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 90 * 24 * time.Hour
)

// Organization names every certificate's issuer and subject.
const Organization = "legion"

// CA is the cluster's root: its certificate and, on managers, its key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey // nil where only verification is needed
	// Lifetime of the certificates it issues; CertLifetime when zero.
	Lifetime time.Duration
}

// NewCA makes a root CA with a fresh P-256 key.
func NewCA(now time.Time) (*CA, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "legion root CA", Organization: []string{Organization}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the root CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// NewKey makes a P-256 private key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a P-256 key: %w", err)
	}
	return k, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // the system's random source failed
	}
	return n
}

// CSR makes a certificate request for a key, naming its holder.
func CSR(key *ecdsa.PrivateKey, name string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: name, Organization: []string{Organization}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("making a certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// Identity is who a certificate names and in what role.
type Identity struct {
	Name string
	Role Role
}

// IdentityOf reads a certificate's identity.
func IdentityOf(c *x509.Certificate) Identity {
	id := Identity{Name: c.Subject.CommonName}
	if len(c.Subject.OrganizationalUnit) > 0 {
		id.Role = Role(c.Subject.OrganizationalUnit[0])
	}
	return id
}

// Issue signs a certificate request for a holder (the request's key,
// the identity given here: a requester cannot choose its own name or
// role). hosts become the certificate's DNS names and IP addresses, so a
// manager's certificate serves TLS for its addresses.
func (ca *CA) Issue(csrPEM []byte, id Identity, hosts []string, now time.Time) ([]byte, error) {
	if ca.Key == nil {
		return nil, errors.New("issuing a certificate: this node does not hold the CA key")
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	lifetime := ca.Lifetime
	if lifetime <= 0 {
		lifetime = CertLifetime
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{CommonName: id.Name, Organization: []string{Organization},
			OrganizationalUnit: []string{string(id.Role)}},
		NotBefore:   now.Add(-min(time.Minute, lifetime/10)), // for clocks a little behind
		NotAfter:    now.Add(lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", id.Name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// parseCSR reads a PEM certificate request of an ECDSA key, signed by
// that key.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("certificate request: expected a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: signature: %w", err)
	}
	if _, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok {
		return nil, errors.New("certificate request: expected an ECDSA key")
	}
	return csr, nil
}

// CSRKey is the fingerprint (KeyFingerprint) of the key a certificate
// request was signed with, the request checked as Issue checks it.
func CSRKey(csrPEM []byte) (string, error) {
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return "", err
	}
	return KeyFingerprint(csr.RawSubjectPublicKeyInfo), nil
}

// RenewAt is when a certificate is renewed: two thirds into its life.
func RenewAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

// Digest is the CA's fingerprint as join tokens carry it: the SHA-256 of
// its certificate, in lower-case base32.
func Digest(caCert *x509.Certificate) string {
	sum := sha256.Sum256(caCert.Raw)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

// CertPEM encodes the CA's certificate.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM encodes the CA's key.
func (ca *CA) KeyPEM() ([]byte, error) { return KeyPEM(ca.Key) }

// KeyPEM encodes a private key.
func KeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// ParseCA reads a CA from its certificate and (optionally) key PEM.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca := &CA{Cert: cert}
	if len(keyPEM) > 0 {
		if ca.Key, err = ParseKey(keyPEM); err != nil {
			return nil, fmt.Errorf("CA key: %w", err)
		}
	}
	return ca, nil
}

// ParseCert reads the first certificate of a PEM bundle.
func ParseCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// ParseKey reads the first EC private key of a PEM bundle.
func ParseKey(data []byte) (*ecdsa.PrivateKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM EC PRIVATE KEY found")
		}
		if b.Type == "EC PRIVATE KEY" {
			return x509.ParseECPrivateKey(b.Bytes)
		}
	}
}
