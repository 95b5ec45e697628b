package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Rotate makes the CA that replaces ca: a new root with a fresh key, and
// the same certificate signed by ca (cross), which nodes that trust only
// ca verify the new root's certificates through until they trust it.
func (ca *CA) Rotate(now time.Time) (next *CA, cross *x509.Certificate, err error) {
	if ca.Key == nil {
		return nil, nil, errors.New("rotating the CA: this node does not hold the CA key")
	}
	if next, err = NewCA(now); err != nil {
		return nil, nil, err
	}
	if cross, err = ca.RotateTo(next); err != nil {
		return nil, nil, err
	}
	return next, cross, nil
}

// RotateTo is Rotate to a CA given (one ImportCA read): it returns next's
// certificate signed by ca (cross). next takes ca's certificate lifetime.
func (ca *CA) RotateTo(next *CA) (cross *x509.Certificate, err error) {
	if ca.Key == nil {
		return nil, errors.New("rotating the CA: this node does not hold the CA key")
	}
	if next.Key == nil {
		return nil, errors.New("rotating the CA: the new CA has no key")
	}
	if next.Key.PublicKey.Equal(ca.Cert.PublicKey) {
		return nil, &ImportError{Err: errSameKey}
	}
	next.Lifetime = ca.Lifetime
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               next.Cert.Subject,
		SubjectKeyId:          next.Cert.SubjectKeyId,
		NotBefore:             next.Cert.NotBefore,
		NotAfter:              minTime(next.Cert.NotAfter, ca.Cert.NotAfter),
		KeyUsage:              next.Cert.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &next.Key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("cross-signing the new CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// CAName tells CA certificates apart in messages: the subject's common
// name and the digest's first characters.
func CAName(c *x509.Certificate) string {
	d := Digest(c)
	if len(d) > 12 {
		d = d[:12]
	}
	return pkix.Name{CommonName: c.Subject.CommonName}.String() + " " + d
}

// IssuedBy reports whether c was signed by ca's key.
func IssuedBy(c, ca *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, ca.RawSubject) && c.CheckSignatureFrom(ca) == nil
}

// AuthorityPEM is the CA certificates a node keeps in ca.crt while its
// CA rotates: the CA it is issued under first, then the cross-signed copy
// of it, then the CA it replaces, which stays trusted until every node
// renewed. Without a rotation it is the CA alone.
func AuthorityPEM(current, cross, previous *x509.Certificate) []byte {
	var out []byte
	for _, c := range []*x509.Certificate{current, cross, previous} {
		if c != nil {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}
	return out
}

// authority is what a node trusts and presents with its certificate.
type authority struct {
	current *x509.Certificate // the CA this node's certificates come from
	pool    *x509.CertPool    // the roots trusted: current and, while rotating, the previous one
	chain   [][]byte          // presented after the node's certificate: cross-signed copies, then current
}

// parseAuthority reads a ca.crt (AuthorityPEM): the first certificate is
// the current CA; a later one with its key is a cross-signed copy of it,
// presented; any other (the CA it replaces) is trusted beside it. A CA
// imported at init or a rotation need not be self-signed (an intermediate
// of the organisation's PKI), so that does not tell them apart.
func parseAuthority(data []byte) (*authority, error) {
	a := &authority{pool: x509.NewCertPool()}
	var cross [][]byte
	for _, der := range blocksOf(data, "CERTIFICATE") {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		switch {
		case a.current == nil:
			a.current = c
			a.pool.AddCert(c)
		case bytes.Equal(c.RawSubjectPublicKeyInfo, a.current.RawSubjectPublicKeyInfo):
			if !c.Equal(a.current) {
				cross = append(cross, c.Raw)
			}
		default:
			a.pool.AddCert(c)
		}
	}
	if a.current == nil {
		return nil, errors.New("no PEM CERTIFICATE found")
	}
	a.chain = append(cross, a.current.Raw)
	return a, nil
}
