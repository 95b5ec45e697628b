package ingress

import (
	"strings"
	"testing"
)

// ParseCertificate reads Secrets users write: whatever the bytes, it either
// fails or gives a certificate with its leaf parsed.
func FuzzParseCertificate(f *testing.F) {
	ca := newTestCA(f)
	f.Add(ca.leafPEM(f, 2, "a.example"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCertificate(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "certificate PEM: ") {
				t.Errorf("error %q does not say it is about the certificate PEM", err)
			}
			return
		}
		if c.Leaf == nil || len(c.Certificate) == 0 || c.PrivateKey == nil {
			t.Errorf("certificate without leaf, chain or key: %+v", c)
		}
	})
}

// Whatever the route and request paths, a match is whole segments: the
// request path is the prefix or continues it with "/".
func FuzzPathMatches(f *testing.F) {
	f.Add("/shop", "/shopping")
	f.Add("/shop/", "/shop/cart")
	f.Add("", "/")
	f.Fuzz(func(t *testing.T, routePath, path string) {
		prefix := normalisePath(routePath)
		got := pathMatches(prefix, path)
		want := prefix == "/" || path == prefix || strings.HasPrefix(path, prefix+"/")
		if got != want {
			t.Errorf("pathMatches(%q, %q) = %v, want %v", prefix, path, got, want)
		}
	})
}
