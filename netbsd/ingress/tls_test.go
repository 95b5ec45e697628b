package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testCA signs P-256 leaf certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ingress test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leafPEM is a Secret's content: the leaf, the CA, and the leaf's key.
func (ca *testCA) leafPEM(t testing.TB, serial int64, hosts ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	return out
}

func mustParse(t testing.TB, pemData []byte) *tls.Certificate {
	t.Helper()
	c, err := ParseCertificate(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseCertificate(t *testing.T) {
	ca := newTestCA(t)
	good := ca.leafPEM(t, 2, "a.example")
	c := mustParse(t, good)
	if got := []string{c.Leaf.Subject.CommonName, c.Leaf.DNSNames[0]}; !cmp.Equal(got, []string{"a.example", "a.example"}) {
		t.Errorf("leaf names %v, want a.example", got)
	}
	if len(c.Certificate) != 2 {
		t.Errorf("chain of %d certificates, want 2 (leaf and CA)", len(c.Certificate))
	}
	certOnly, _, _ := strings.Cut(string(good), "-----BEGIN PRIVATE KEY")
	keyOnly := good[strings.Index(string(good), "-----BEGIN PRIVATE KEY"):]
	other := ca.leafPEM(t, 3, "b.example")
	otherKey := other[strings.Index(string(other), "-----BEGIN PRIVATE KEY"):]
	tests := []struct {
		name string
		pem  string
		want string
	}{
		{"empty", "", "no PEM blocks"},
		{"not PEM", "hello", "no PEM blocks"},
		{"no key", certOnly, "no PRIVATE KEY block"},
		{"no certificate", string(keyOnly), "no CERTIFICATE block"},
		{"two keys", string(good) + string(otherKey), "2 private keys"},
		{"key of another certificate", certOnly + string(otherKey), "private key does not match public key"},
	}
	for _, tt := range tests {
		_, err := ParseCertificate([]byte(tt.pem))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}

// tlsGet asks the TLS proxy for sni with the given client protocols.
func tlsGet(t *testing.T, ca *testCA, proxyAddr, sni string, h2 bool) (*http.Response, string, error) {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.pool, ServerName: sni},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, "https://"+proxyAddr+"/", nil)
	req.Host = sni
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	be := addr(namedBackend(t, "web"))
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "ns", Name: "exact", Host: "a.example", Backends: []string{be}, TLSSecret: "a-tls"},
		{Namespace: "ns", Name: "wild", Host: "*.example", Backends: []string{be}, TLSSecret: "wild-tls"},
		// An exact route without TLS does not hide the wildcard's certificate.
		{Namespace: "ns", Name: "plain", Host: "p.example", Backends: []string{be}},
		// A route whose Secret did not parse has no certificate.
		{Namespace: "ns", Name: "broken", Host: "broken.other", Backends: []string{be}, TLSSecret: "broken-tls"},
	})
	p.SetCertificates(map[string]*tls.Certificate{
		"ns/a-tls":      mustParse(t, ca.leafPEM(t, 10, "a.example")),
		"ns/wild-tls":   mustParse(t, ca.leafPEM(t, 11, "*.example")),
		"ns/broken-tls": nil,
	})
	proxyAddr := startProxy(t, p, true)

	type served struct {
		Cert, Proto, Body, ForwardedProto string
	}
	tests := []struct {
		sni  string
		h2   bool
		want served
	}{
		{"a.example", true, served{"a.example", "HTTP/2.0", "web /", "https"}},
		{"a.example", false, served{"a.example", "HTTP/1.1", "web /", "https"}},
		{"b.example", true, served{"*.example", "HTTP/2.0", "web /", "https"}},
		{"p.example", true, served{"*.example", "HTTP/2.0", "web /", "https"}},
	}
	for _, tt := range tests {
		resp, body, err := tlsGet(t, ca, proxyAddr, tt.sni, tt.h2)
		if err != nil {
			t.Errorf("%s: %v", tt.sni, err)
			continue
		}
		got := served{
			Cert:           resp.TLS.PeerCertificates[0].Subject.CommonName,
			Proto:          resp.Proto,
			Body:           body,
			ForwardedProto: resp.Header.Get("X-Seen-Forwarded-Proto"),
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s (h2 %v) (-want +got):\n%s", tt.sni, tt.h2, d)
		}
	}
	for _, sni := range []string{"c.other", "broken.other", "x.y.example"} {
		if _, _, err := tlsGet(t, ca, proxyAddr, sni, true); err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
			t.Errorf("%s: error %v, want the handshake refused by the proxy", sni, err)
		}
	}

	// A client sending no SNI (connecting by address) gets no certificate.
	conn, err := tls.Dial("tcp", proxyAddr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Error("handshake without SNI succeeded, want it refused")
	} else if !strings.Contains(err.Error(), "remote error: tls:") {
		t.Errorf("handshake without SNI: %v, want it refused by the proxy", err)
	}

	// A renewed certificate takes over without restarting anything.
	p.SetCertificates(map[string]*tls.Certificate{"ns/a-tls": mustParse(t, ca.leafPEM(t, 12, "a.example", "renewed.a.example"))})
	resp, _, err := tlsGet(t, ca, proxyAddr, "a.example", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 12 {
		t.Errorf("serial %d after SetCertificates, want the renewed 12", got)
	}
}

// GetCertificate says why it has no certificate for a name, as the handshake
// error the server logs.
func TestGetCertificateErrors(t *testing.T) {
	ca := newTestCA(t)
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "ns", Name: "a", Host: "a.example", TLSSecret: "a-tls"},
		{Namespace: "ns", Name: "b", Host: "b.example", TLSSecret: "b-tls"},
		{Namespace: "ns", Name: "wild", Host: "*.example", TLSSecret: "wild-tls"},
	})
	p.SetCertificates(map[string]*tls.Certificate{
		"ns/a-tls":    mustParse(t, ca.leafPEM(t, 20, "a.example")),
		"ns/wild-tls": mustParse(t, ca.leafPEM(t, 21, "*.example")),
	})
	get := p.TLSConfig().GetCertificate
	tests := []struct{ sni, want string }{
		{"a.example", "serial 20"},
		{"A.EXAMPLE", "serial 20"},
		{"z.example", "serial 21"},
		{"b.example", `ingress: no certificate loaded from secret ns/b-tls for host "b.example"`},
		{"other.org", `ingress: no route with TLS for host "other.org"`},
		{"", "ingress: no server name (SNI) in the client hello"},
	}
	for _, tt := range tests {
		c, err := get(&tls.ClientHelloInfo{ServerName: tt.sni})
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = "serial " + c.Leaf.SerialNumber.String()
		}
		if got != tt.want {
			t.Errorf("GetCertificate(%q) = %s, want %s", tt.sni, got, tt.want)
		}
	}
}
