package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
)

func selfSigned(t *testing.T, host string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		DNSNames: []string{host}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})...)
}

// The node's proxy takes a route's certificate from the delivered values,
// keeps the last good one when a new one does not parse, and drops it with
// its route.
func TestIngressCertificatesFollowTheRoutes(t *testing.T) {
	t.Parallel()
	g := NewIngress(quietLog())
	cfg := g.Proxy.TLSConfig()
	serial := func() (string, error) {
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{ServerName: "site.test"})
		if err != nil {
			return "", err
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return "", err
		}
		return leaf.SerialNumber.String(), nil
	}
	route := []endpoints.Route{{Namespace: "web", Name: "site", Host: "site.test", Path: "/", TLSSecret: "tls"}}
	key := legion.Key(legion.KindSecret, "web", "tls")
	first := selfSigned(t, "site.test")
	g.Apply(context.Background(), route, map[string][]byte{key: first})
	s1, err := serial()
	if err != nil {
		t.Fatalf("the route's certificate was not taken: %v", err)
	}
	g.Apply(context.Background(), route, map[string][]byte{key: []byte("-----BEGIN CERTIFICATE-----\nbroken\n")})
	if s, err := serial(); err != nil || s != s1 {
		t.Fatalf("a certificate that does not parse must leave the last good one: %s, %v", s, err)
	}
	g.Apply(context.Background(), route, map[string][]byte{key: selfSigned(t, "site.test")})
	if s, err := serial(); err != nil || s == s1 {
		t.Fatalf("a renewed certificate must take over: %s, %v", s, err)
	}
	g.Apply(context.Background(), nil, nil)
	if _, err := serial(); err == nil {
		t.Fatal("a route gone must take its certificate along")
	}
}
