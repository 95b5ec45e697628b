package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/pki/pkitest"
)

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// testRSAKey is one RSA key for the tests that need one (making it is slow).
func testRSAKey(t *testing.T) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		rsaKey = k
	})
	return rsaKey
}

func pkcs8(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// A CA of the operator's own is taken as it is: self-signed or an
// intermediate, its key SEC1 or PKCS #8, on any of the curves pki signs
// with; the key is written back as a generated CA's is, and the CA issues
// certificates that verify under it alone.
func TestImportCATakesAnOperatorsCA(t *testing.T) {
	t.Parallel()
	now := time.Now()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	root := pkitest.NewCA(t, pkitest.Options{Name: "example root", Key: testRSAKey(t)})
	for name, c := range map[string]*pkitest.CA{
		"self-signed P-256":           pkitest.NewCA(t, pkitest.Options{}),
		"self-signed P-384":           pkitest.NewCA(t, pkitest.Options{Key: p384}),
		"intermediate of an RSA root": pkitest.NewCA(t, pkitest.Options{Name: "legion intermediate", Parent: root}),
		"server and client EKUs": pkitest.NewCA(t, pkitest.Options{Edit: func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		}}),
		"pathlen 1": pkitest.NewCA(t, pkitest.Options{Edit: func(c *x509.Certificate) { c.MaxPathLen = 1 }}),
	} {
		for form, keyPEM := range map[string][]byte{"PKCS #8": c.KeyPEM(t), "SEC1": mustKeyPEM(t, c.Key)} {
			ca, err := ImportCA(c.CertPEM(), keyPEM, now)
			if err != nil {
				t.Errorf("%s, key %s: %v", name, form, err)
				continue
			}
			if !ca.Cert.Equal(c.Cert) {
				t.Errorf("%s: the CA imported is another certificate", name)
			}
			kp, err := ca.KeyPEM()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := pem.Decode(kp); b == nil || b.Type != "EC PRIVATE KEY" {
				t.Errorf("%s: the key is kept as %q, want EC PRIVATE KEY as a generated CA's", name, b.Type)
			}
			if back, err := ParseCA(ca.CertPEM(), kp); err != nil || !back.Key.Equal(ca.Key) {
				t.Errorf("%s: the CA as kept does not read back: %v", name, err)
			}
			m := issue(t, ca, Identity{Name: "m1", Role: RoleManager})
			if err := m.ClientConfig().VerifyPeerCertificate(m.Current().Certificate, nil); err != nil {
				t.Errorf("%s: a manager's certificate does not verify under the CA alone: %v", name, err)
			}
			if _, err := m.Current().Leaf.Verify(verifyClient(m)); err != nil {
				t.Errorf("%s: a certificate is refused as a client's: %v", name, err)
			}
		}
	}
}

func mustKeyPEM(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	kp, err := KeyPEM(k.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// Each CA that cannot be the cluster's is refused, naming what is wrong
// and whether the certificate or the key is at fault.
func TestImportCARefuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	good := pkitest.NewCA(t, pkitest.Options{})
	other := pkitest.NewCA(t, pkitest.Options{})
	edited := func(edit func(*x509.Certificate)) []byte {
		return pkitest.NewCA(t, pkitest.Options{Key: good.Key, Edit: edit}).CertPEM()
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaCA := pkitest.NewCA(t, pkitest.Options{Key: testRSAKey(t)})
	p224CA := pkitest.NewCA(t, pkitest.Options{Key: p224})
	noSKID, err := asn1.Marshal([]byte{}) // an empty OCTET STRING
	if err != nil {
		t.Fatal(err)
	}
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}})
	for _, c := range []struct {
		name       string
		cert, key  []byte
		keyAtFault bool
		want       string
	}{
		{"no certificate", []byte("junk"), good.KeyPEM(t), false, "no PEM CERTIFICATE found"},
		{"a chain", append(good.CertPEM(), other.CertPEM()...), good.KeyPEM(t), false, "2 certificates found, expected the CA's alone"},
		{"not a CA", edited(func(c *x509.Certificate) { c.IsCA = false }), good.KeyPEM(t), false, "not a CA certificate: expected basicConstraints CA:TRUE"},
		{"no basic constraints", edited(func(c *x509.Certificate) { c.IsCA, c.BasicConstraintsValid = false, false }), good.KeyPEM(t), false, "expected basicConstraints CA:TRUE"},
		{"no keyCertSign", edited(func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature }), good.KeyPEM(t), false, "expected the keyCertSign key usage"},
		{"expired", edited(func(c *x509.Certificate) { c.NotBefore, c.NotAfter = now.Add(-48*time.Hour), now.Add(-24*time.Hour) }), good.KeyPEM(t), false, "expired on "},
		{"not yet valid", edited(func(c *x509.Certificate) { c.NotBefore = now.Add(time.Hour) }), good.KeyPEM(t), false, "not valid yet: valid from "},
		{"an RSA CA", rsaCA.CertPEM(), rsaCA.KeyPEM(t), false, "its public key is RSA: Legion signs with ECDSA keys only (P-256, P-384 or P-521)"},
		{"a P-224 CA", p224CA.CertPEM(), p224CA.KeyPEM(t), false, "its public key is ECDSA on P-224: Legion signs with ECDSA keys only"},
		{"no subject key identifier", edited(func(c *x509.Certificate) {
			c.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 14}, Value: noSKID}}
		}), good.KeyPEM(t), false, "no subject key identifier"},
		{"pathlen 0", edited(func(c *x509.Certificate) { c.MaxPathLen, c.MaxPathLenZero = 0, true }), good.KeyPEM(t), false, "pathlen:0 leaves no room for the cross-signed CA"},
		{"name constraints", edited(func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"example.com"} }), good.KeyPEM(t), false, "it has name constraints: not supported"},
		{"server auth only", edited(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }), good.KeyPEM(t), false, "do not allow both serverAuth and clientAuth"},
		{"no key", good.CertPEM(), good.CertPEM(), true, "no PEM private key found"},
		{"the key of another CA", good.CertPEM(), other.KeyPEM(t), true, "the key does not match the certificate"},
		{"an RSA key (PKCS #1)", good.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testRSAKey(t))}), true, "the key is RSA: Legion signs with ECDSA keys only"},
		{"an RSA key (PKCS #8)", good.CertPEM(), pkcs8(t, testRSAKey(t)), true, "the key is RSA: Legion signs with ECDSA keys only"},
		{"an Ed25519 key", good.CertPEM(), pkcs8(t, edKey), true, "the key is Ed25519: Legion signs with ECDSA keys only"},
		{"a P-224 key", good.CertPEM(), pkcs8(t, p224), true, "the key is ECDSA on P-224"},
		{"an encrypted key", good.CertPEM(), encrypted, true, "the key is encrypted: expected it in the clear"},
		{"an encrypted PKCS #8 key", good.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}), true, "the key is encrypted"},
	} {
		_, err := ImportCA(c.cert, c.key, now)
		var ie *ImportError
		if !errors.As(err, &ie) {
			t.Errorf("%s: got %v, want an ImportError", c.name, err)
			continue
		}
		if ie.Key != c.keyAtFault || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %q (key at fault: %v), want %q (key at fault: %v)", c.name, err, ie.Key, c.want, c.keyAtFault)
		}
	}
}

// A rotation to and from CAs of the operator's PKI that are intermediates
// (not self-signed): a worker that trusts only the old one verifies a
// manager renewed under the new one through the cross-signed copy and
// sees the rotation, and the manager trusts the worker's old certificate
// while rotating.
func TestRotateBetweenIntermediateCAs(t *testing.T) {
	t.Parallel()
	now := time.Now()
	root := pkitest.NewCA(t, pkitest.Options{Name: "example root"})
	imp := func(name string) *CA {
		c := pkitest.NewCA(t, pkitest.Options{Name: name, Parent: root})
		ca, err := ImportCA(c.CertPEM(), c.KeyPEM(t), now)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	old, next := imp("legion 1"), imp("legion 2")
	cross, err := old.RotateTo(next)
	if err != nil {
		t.Fatal(err)
	}
	if !IssuedBy(cross, old.Cert) {
		t.Fatal("the cross-signed copy is not signed by the old CA")
	}
	if _, err := old.RotateTo(&CA{Cert: old.Cert, Key: old.Key}); err == nil || !strings.Contains(err.Error(), "a rotation needs a new key") {
		t.Errorf("a rotation to the CA's own key: %v", err)
	}
	wcreds, mcreds := midRotation(t, old, next, cross, Identity{Name: "w1", Role: RoleWorker}, now)
	// Once over, the old CA is no longer trusted, though the root above
	// both is the same: the cluster trusts its CA, not what issued it.
	if err := mcreds.SetAuthority(AuthorityPEM(next.Cert, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if mcreds.Trusts(presented(t, wcreds)) {
		t.Error("after the rotation Trusts takes the old CA's certificate")
	}
}
