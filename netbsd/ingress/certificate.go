package ingress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParseCertificate reads a Secret's PEM, the certificate chain (leaf first)
// and its private key in one or more blocks in any order, into a TLS
// certificate. Errors say what is missing or wrong.
func ParseCertificate(pemData []byte) (*tls.Certificate, error) {
	var certs, keys int
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			certs++
		case strings.HasSuffix(block.Type, "PRIVATE KEY"):
			keys++
		}
	}
	switch {
	case certs == 0 && keys == 0:
		return nil, errors.New("certificate PEM: no PEM blocks, expected a CERTIFICATE chain and a PRIVATE KEY")
	case certs == 0:
		return nil, errors.New("certificate PEM: no CERTIFICATE block")
	case keys == 0:
		return nil, errors.New("certificate PEM: no PRIVATE KEY block")
	case keys > 1:
		return nil, fmt.Errorf("certificate PEM: %d private keys, expected one", keys)
	}
	// X509KeyPair skips the blocks of the other kind in each input, so the
	// same bytes serve as both.
	cert, err := tls.X509KeyPair(pemData, pemData)
	if err != nil {
		return nil, fmt.Errorf("certificate PEM: %w", err)
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("certificate PEM: leaf certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	return &cert, nil
}

// certificate is the certificate for an SNI name, or why there is none:
// of the Secrets the host's routes name, in the order certificateKeys
// gives, the first loaded one whose certificate is valid for the name.
// A certificate that does not cover the name is never served.
func (p *Proxy) certificate(serverName string) (*tls.Certificate, error) {
	host := requestHost(serverName)
	if host == "" {
		return nil, errors.New("ingress: no server name (SNI) in the client hello")
	}
	keys := p.routes.Load().certificateKeys(host)
	if len(keys) == 0 {
		return nil, fmt.Errorf("ingress: no route with TLS for host %q", host)
	}
	var certs map[string]*tls.Certificate
	if m := p.certs.Load(); m != nil {
		certs = *m
	}
	var loaded []string
	for _, key := range keys {
		c := certs[key]
		if c == nil {
			continue
		}
		if Covers(c, host) {
			return c, nil
		}
		loaded = append(loaded, key)
	}
	if len(loaded) > 0 {
		return nil, fmt.Errorf("ingress: the certificate of secret %s does not cover host %q", strings.Join(loaded, ", "), host)
	}
	return nil, fmt.Errorf("ingress: no certificate loaded from secret %s for host %q", strings.Join(keys, ", "), host)
}

// Covers says whether c is valid for the host name.
func Covers(c *tls.Certificate, host string) bool {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	return leaf != nil && leaf.VerifyHostname(host) == nil
}

// reportConflicts logs, when they change, the hosts whose routes name
// several Secrets: each name is served the first certificate covering it,
// in namespace/name order of the routes, on every node alike.
func (p *Proxy) reportConflicts(t *table) {
	c := strings.Join(t.certificateConflicts(), "; ")
	if c == p.conflicts {
		return
	}
	p.conflicts = c
	if c != "" {
		p.Logger.Warn("ingress: routes of one host name several TLS secrets; the first whose certificate covers the name serves it", "conflicts", c)
	}
}

// CertificateConflicts names the hosts whose routes name several TLS
// Secrets, with the Secrets in the order they are tried.
func (p *Proxy) CertificateConflicts() []string {
	p.init()
	return p.routes.Load().certificateConflicts()
}
