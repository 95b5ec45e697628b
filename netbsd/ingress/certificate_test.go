package ingress

import (
	"crypto/tls"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Several routes of one host naming different Secrets: the first (by
// namespace/name) whose certificate covers the name serves it, on every
// proxy alike, and the conflict is reported; a certificate that covers no
// name asked is never served.
func TestCertificateCoversHost(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p := &Proxy{}
	p.SetRoutes([]Route{
		// Sorted first, but its Secret holds another host's certificate.
		{Namespace: "a", Name: "shop", Host: "shop.example", TLSSecret: "wrong"},
		{Namespace: "b", Name: "shop", Host: "shop.example", Path: "/cart", TLSSecret: "right"},
		{Namespace: "c", Name: "shop", Host: "shop.example", Path: "/pay", TLSSecret: "also-right"},
		{Namespace: "a", Name: "lone", Host: "lone.example", TLSSecret: "wrong"},
		{Namespace: "a", Name: "wild", Host: "*.wild.example", TLSSecret: "wrong"},
	})
	p.SetCertificates(map[string]*tls.Certificate{
		"a/wrong":      mustParse(t, ca.leafPEM(t, 30, "other.example")),
		"b/right":      mustParse(t, ca.leafPEM(t, 31, "shop.example")),
		"c/also-right": mustParse(t, ca.leafPEM(t, 32, "shop.example")),
	})
	get := p.TLSConfig().GetCertificate
	tests := []struct{ sni, want string }{
		{"shop.example", "serial 31"},
		{"lone.example", `ingress: the certificate of secret a/wrong does not cover host "lone.example"`},
		{"x.wild.example", `ingress: the certificate of secret a/wrong does not cover host "x.wild.example"`},
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
	want := []string{"shop.example: a/wrong, b/right, c/also-right"}
	if d := cmp.Diff(want, p.CertificateConflicts()); d != "" {
		t.Errorf("conflicts (-want +got):\n%s", d)
	}

	// Over TLS: the handshake for a name no certificate covers fails.
	proxyAddr := startProxy(t, p, true)
	if _, _, err := tlsGet(t, ca, proxyAddr, "lone.example", false); err == nil {
		t.Error("lone.example: handshake succeeded with a certificate for another host")
	}
	resp, _, err := tlsGet(t, ca, proxyAddr, "shop.example", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 31 {
		t.Errorf("shop.example served serial %d, want 31", got)
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	c := mustParse(t, ca.leafPEM(t, 40, "*.example", "apex.example"))
	for host, want := range map[string]bool{"a.example": true, "apex.example": true, "example": false, "a.b.example": false, "other.org": false} {
		if got := Covers(c, host); got != want {
			t.Errorf("Covers(%s) = %v, want %v", host, got, want)
		}
	}
	c.Leaf = nil // as a certificate made without ParseCertificate
	if !Covers(c, "a.example") {
		t.Error("Covers without a parsed leaf: false, want it parsed from the chain")
	}
}
