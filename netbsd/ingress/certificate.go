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
