package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ImportError is why a CA given to import (legion init or legion ca
// rotate with --ca-cert and --ca-key) was refused. Key tells which of the
// two is at fault: the key, or else the certificate.
type ImportError struct {
	Key bool
	Err error
}

func (e *ImportError) Error() string {
	if e.Key {
		return "CA key: " + e.Err.Error()
	}
	return "CA certificate: " + e.Err.Error()
}

func (e *ImportError) Unwrap() error { return e.Err }

func certErr(format string, a ...any) error {
	return &ImportError{Err: fmt.Errorf(format, a...)}
}

func keyErr(format string, a ...any) error {
	return &ImportError{Key: true, Err: fmt.Errorf(format, a...)}
}

// signingCurves are the curves of the ECDSA keys a CA may sign with.
var signingCurves = []elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()}

const signingKeys = "ECDSA keys only (P-256, P-384 or P-521)"

// ImportCA reads a CA the operator brings (its certificate and private
// key, PEM) and checks that the cluster can take it as its root and use
// it as it uses one init made: a CA certificate (basicConstraints CA:TRUE
// with the keyCertSign usage) valid now, with a subject key identifier
// (which tells the CA of each node's certificate during a rotation), no
// name constraints, extended key usages that allow both TLS server and
// client certificates, room under it for a cross-signed CA (no pathlen:0,
// which a later rotation needs), and an ECDSA key on P-256, P-384 or
// P-521 that matches it. The key is taken as SEC1 ("EC PRIVATE KEY") or
// unencrypted PKCS #8 ("PRIVATE KEY"); KeyPEM writes it back as SEC1, as
// for a generated CA.
//
// The certificate need not be self-signed: an intermediate CA of the
// organisation's PKI is taken as it is, the cluster trusting it as its
// root (the anchor where verification stops) without the CAs above it.
// Errors are *ImportError.
func ImportCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	cert, err := importCert(certPEM, now)
	if err != nil {
		return nil, err
	}
	key, err := importKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, keyErr("the key does not match the certificate (its public key is another key's)")
	}
	return &CA{Cert: cert, Key: key}, nil
}

func importCert(data []byte, now time.Time) (*x509.Certificate, error) {
	blocks := blocksOf(data, "CERTIFICATE")
	switch len(blocks) {
	case 0:
		return nil, certErr("no PEM CERTIFICATE found")
	case 1:
	default:
		return nil, certErr("%d certificates found, expected the CA's alone (not a chain: the cluster trusts this certificate as its root, whatever issued it)", len(blocks))
	}
	c, err := x509.ParseCertificate(blocks[0])
	if err != nil {
		return nil, certErr("%w", err)
	}
	if !c.BasicConstraintsValid || !c.IsCA {
		return nil, certErr("not a CA certificate: expected basicConstraints CA:TRUE")
	}
	if c.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, certErr("not a CA certificate: expected the keyCertSign key usage")
	}
	if now.Before(c.NotBefore) {
		return nil, certErr("not valid yet: valid from %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(c.NotAfter) {
		return nil, certErr("expired on %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return nil, certErr("its public key is %s: Legion signs with %s", keyKind(c.PublicKey), signingKeys)
	}
	if !slices.Contains(signingCurves, pub.Curve) {
		return nil, certErr("its public key is ECDSA on %s: Legion signs with %s", pub.Curve.Params().Name, signingKeys)
	}
	if len(c.SubjectKeyId) == 0 {
		return nil, certErr("no subject key identifier: expected one (RFC 5280 requires it of a CA), which tells under which CA each node's certificate was issued")
	}
	if c.MaxPathLen == 0 && c.MaxPathLenZero {
		return nil, certErr("pathlen:0 leaves no room for the cross-signed CA a rotation (legion ca rotate) presents under it: expected no path length limit, or at least 1")
	}
	if constrained(c) {
		return nil, certErr("it has name constraints: not supported, as node certificates name localhost, 127.0.0.1, ::1 and each manager's address")
	}
	if len(c.ExtKeyUsage) > 0 || len(c.UnknownExtKeyUsage) > 0 {
		if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) &&
			(!slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)) {
			return nil, certErr("its extended key usages do not allow both serverAuth and clientAuth, which every node's certificate needs: expected none, or both")
		}
	}
	return c, nil
}

func constrained(c *x509.Certificate) bool {
	return c.PermittedDNSDomainsCritical || len(c.PermittedDNSDomains) > 0 || len(c.ExcludedDNSDomains) > 0 ||
		len(c.PermittedIPRanges) > 0 || len(c.ExcludedIPRanges) > 0 ||
		len(c.PermittedEmailAddresses) > 0 || len(c.ExcludedEmailAddresses) > 0 ||
		len(c.PermittedURIDomains) > 0 || len(c.ExcludedURIDomains) > 0
}

func importKey(data []byte) (*ecdsa.PrivateKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, keyErr("no PEM private key found: expected an EC PRIVATE KEY or PRIVATE KEY block")
		}
		if strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") || b.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, keyErr("the key is encrypted: expected it in the clear (openssl pkey -in KEY -out PLAIN); the cluster keeps it as it keeps a CA key it made, sealed under autolock")
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(b.Bytes)
			if err != nil {
				return nil, keyErr("%w", err)
			}
			return signingKey(k)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, keyErr("%w", err)
			}
			return signingKey(k)
		case "RSA PRIVATE KEY":
			return nil, keyErr("the key is RSA: Legion signs with %s", signingKeys)
		}
	}
}

// signingKey is k as a key a CA signs with, or why it is not one.
func signingKey(k any) (*ecdsa.PrivateKey, error) {
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, keyErr("the key is %s: Legion signs with %s", keyKind(k), signingKeys)
	}
	if !slices.Contains(signingCurves, ec.Curve) {
		return nil, keyErr("the key is ECDSA on %s: Legion signs with %s", ec.Curve.Params().Name, signingKeys)
	}
	return ec, nil
}

func keyKind(k any) string {
	switch k.(type) {
	case *rsa.PublicKey, *rsa.PrivateKey:
		return "RSA"
	case ed25519.PublicKey, ed25519.PrivateKey:
		return "Ed25519"
	}
	return fmt.Sprintf("%T", k)
}

// errSameKey: a rotation to a CA with the current one's key.
var errSameKey = errors.New("its key is the current CA's: a rotation needs a new key")
