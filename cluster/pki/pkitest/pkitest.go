// Package pkitest makes CA certificates of an operator's own PKI, as
// legion init --ca-cert and legion ca rotate --ca-cert take them, and
// the ones they refuse. Tests only.
package pkitest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a CA certificate and its key, of any type.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Options shape a CA: the zero value is a self-signed root with a new
// P-256 key, valid from an hour ago for a year, with the keyCertSign and
// cRLSign usages.
type Options struct {
	Name   string        // the subject's common name; "test CA" when empty
	Parent *CA           // signs the certificate (an intermediate); nil: self-signed
	Key    crypto.Signer // nil: a new P-256 key
	// Edit changes the certificate's template before it is signed.
	Edit func(*x509.Certificate)
}

// NewCA makes a CA.
func NewCA(t testing.TB, o Options) *CA {
	t.Helper()
	key := o.Key
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	}
	name := o.Name
	if name == "" {
		name = "test CA"
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"example"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if o.Edit != nil {
		o.Edit(tmpl)
	}
	parent, signer := tmpl, key
	if o.Parent != nil {
		parent, signer = o.Parent.Cert, o.Parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// CertPEM is the certificate as PEM.
func (c *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})
}

// KeyPEM is the key as PEM, unencrypted PKCS #8 ("PRIVATE KEY"), as
// openssl genpkey writes it.
func (c *CA) KeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Files writes the certificate and key to ca.crt and ca.key in a new
// directory and returns their paths.
func (c *CA) Files(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, c.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
