package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

// certSecret is a Secret manifest holding a self-signed certificate for
// hosts and its key.
func certSecret(t *testing.T, ns, name string, hosts ...string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	data := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
	return secretYAML(ns, name, data)
}

func secretYAML(ns, name, text string) string {
	return "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  text: |\n    " +
		strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n    ") + "\n"
}

func routeYAML(ns, name, host, secret string, acme bool) string {
	y := "apiVersion: legion/v1\nkind: Route\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  host: \"" + host + "\"" +
		"\n  service: web\n  tls:\n    secret: " + secret + "\n"
	if acme {
		y += "    acme: {email: ops@example.org, directory: \"https://127.0.0.1:14000/dir\"}\n"
	}
	return y
}

// TestAdmissionRouteCertificate: a Route naming a Secret whose certificate
// does not cover its host is refused, whether the Secret is stored or in
// the same apply, naming the Secret and the host; one covering it, a
// missing Secret, and an ACME route over another host's certificate (which
// the leader replaces) are admitted; a Secret holding no certificate is
// refused with the way out.
func TestAdmissionRouteCertificate(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	applyOK(t, c, certSecret(t, "default", "shop-tls", "shop.example.org"))
	applyRefused(t, m, c, routeYAML("default", "blog", "blog.example.org", "shop-tls", false), codes.FailedPrecondition,
		"Route default/blog: spec.tls.secret", "secret shop-tls (for shop.example.org) does not cover host blog.example.org")
	applyRefused(t, m, c, certSecret(t, "default", "wild-tls", "a.example.org")+"---\n"+routeYAML("default", "wild", "*.example.org", "wild-tls", false),
		codes.FailedPrecondition, "does not cover host *.example.org")
	applyRefused(t, m, c, secretYAML("default", "notes", "just a note")+"---\n"+routeYAML("default", "notes", "notes.example.org", "notes", false),
		codes.FailedPrecondition, "secret notes holds no certificate")
	applyRefused(t, m, c, secretYAML("default", "notes", "just a note")+"---\n"+routeYAML("default", "notes", "notes.example.org", "notes", true),
		codes.FailedPrecondition, "name a new or empty Secret for the ACME certificate")

	applyOK(t, c, routeYAML("default", "shop", "shop.example.org", "shop-tls", false))
	applyOK(t, c, routeYAML("default", "later", "later.example.org", "later-tls", false))
	applyOK(t, c, routeYAML("default", "blog", "blog.example.org", "shop-tls", true))
	applyOK(t, c, certSecret(t, "default", "wild-tls", "*.example.org")+"---\n"+routeYAML("default", "wild", "*.example.org", "wild-tls", false))
}

// TestAdmissionACMEDirectoryOnLoopback: the leader fetches a route's
// ACME directory, so a namespace user may not point it at the managers'
// loopback; the cluster admin may (tests run ACME servers there), and a
// user may name another https directory.
func TestAdmissionACMEDirectoryOnLoopback(t *testing.T) {
	t.Parallel()
	_, admin, mallory := teamUser(t)
	ctx := context.Background()
	loopback := routeYAML("team", "web", "shop.example.org", "web-tls", true)
	_, err := mallory.Apply(ctx, mustParse(t, loopback), client.ApplyOptions{})
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(),
		`Route team/web: spec.tls.acme.directory: "https://127.0.0.1:14000/dir" is on the managers' loopback, which only the cluster admin may name`) {
		t.Fatalf("a user's ACME directory on loopback: %v, want PERMISSION_DENIED", err)
	}
	elsewhere := strings.Replace(loopback, "https://127.0.0.1:14000/dir", "https://acme.example.net/dir", 1)
	if _, err := mallory.Apply(ctx, mustParse(t, elsewhere), client.ApplyOptions{}); err != nil {
		t.Fatalf("a user's ACME directory elsewhere: %v", err)
	}
	applyOK(t, admin, strings.NewReplacer("namespace: team", "namespace: lab", "shop.example.org", "lab.example.org").Replace(loopback))
}
