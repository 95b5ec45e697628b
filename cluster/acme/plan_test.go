package acme

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legionbsd/legion"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// leaf is a certificate for hosts valid from t0 for life.
func leaf(t *testing.T, life time.Duration, hosts ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: t0, NotAfter: t0.Add(life)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func route(ns, name, host, secret string, a *legion.RouteACME) *legion.Route {
	r := &legion.Route{}
	r.Metadata.Namespace, r.Metadata.Name = ns, name
	r.Spec.Host = host
	r.Spec.TLS = &legion.RouteTLS{Secret: secret, ACME: a}
	return r
}

var le = &legion.RouteACME{Email: "ops@example.org", Directory: legion.LetsEncryptDirectory}

func TestGroups(t *testing.T) {
	t.Parallel()
	other := &legion.RouteACME{Email: "other@example.org", Directory: legion.LetsEncryptDirectory}
	plain := route("a", "plain", "p.example", "", nil)
	plain.Spec.TLS = nil
	gs := Groups([]*legion.Route{
		route("b", "z", "b.example", "tls", nil),
		route("a", "y", "www.example", "tls", other),
		route("a", "x", "shop.example", "tls", le),
		route("a", "w", "shop.example", "tls", nil), // same host: one order
		route("a", "v", "v.example", "own", nil),
		plain,
	})
	type summary struct {
		Key      string
		Hosts    []string
		Routes   []string
		Email    string
		Conflict string
	}
	var got []summary
	for _, g := range gs {
		s := summary{Key: g.Key(), Hosts: g.Hosts, Conflict: g.Conflict}
		for _, r := range g.Routes {
			s.Routes = append(s.Routes, r.Metadata.Name)
		}
		if g.ACME != nil {
			s.Email = g.ACME.Email
		}
		got = append(got, s)
	}
	want := []summary{
		{Key: "a/own", Hosts: []string{"v.example"}, Routes: []string{"v"}},
		// The first route by name asking for ACME gives the settings.
		{Key: "a/tls", Hosts: []string{"shop.example", "www.example"}, Routes: []string{"w", "x", "y"}, Email: "ops@example.org", Conflict: "y"},
		{Key: "b/tls", Hosts: []string{"b.example"}, Routes: []string{"z"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("groups (-want +got):\n%s", d)
	}
}

func TestUncovered(t *testing.T) {
	t.Parallel()
	c := leaf(t, time.Hour, "a.example", "*.wild.example")
	got := Uncovered(c, []string{"a.example", "b.example", "x.wild.example", "*.wild.example", "*.example"})
	if d := cmp.Diff([]string{"b.example", "*.example"}, got); d != "" {
		t.Errorf("uncovered (-want +got):\n%s", d)
	}
}

func TestReadCertificate(t *testing.T) {
	t.Parallel()
	c := leaf(t, time.Hour, "a.example")
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("k")})
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	got, err := ReadCertificate(data)
	if err != nil || got.DNSNames[0] != "a.example" {
		t.Errorf("ReadCertificate = %v, %v; want the leaf after the key", got, err)
	}
	if _, err := ReadCertificate([]byte("notes")); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("ReadCertificate(text) error %v, want ErrNoCertificate", err)
	}
	bad := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})
	if _, err := ReadCertificate(bad); err == nil || errors.Is(err, ErrNoCertificate) {
		t.Errorf("ReadCertificate(junk) error %v, want a parse error", err)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, RetryDelay(RetryFirst, RetryMax, n))
	}
	m := time.Minute
	want := []time.Duration{10 * m, 20 * m, 40 * m, 80 * m, 160 * m, 320 * m, 640 * m, 1280 * m, RetryMax, RetryMax}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("delays (-want +got):\n%s", d)
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const life = 90 * 24 * time.Hour
	g := Groups([]*legion.Route{route("ns", "r", "shop.example", "tls", le)})[0]
	good := leaf(t, life, "shop.example")
	renew := t0.Add(60 * 24 * time.Hour)
	fail := &Failure{Input: g.input(), Count: 2, Next: t0.Add(time.Hour), Err: "validating shop.example: 403 unauthorized"}
	tests := []struct {
		name      string
		sec       SecretState
		fail      *Failure
		now       time.Time
		order     bool
		reason    string
		message   string
		nextOrder *time.Time
	}{
		{name: "no secret", now: t0, order: true, reason: "no certificate in secret tls", message: "ordering a certificate: no certificate in secret tls"},
		{name: "empty secret", sec: SecretState{Exists: true, Empty: true}, now: t0, order: true, reason: "no certificate in secret tls"},
		{name: "secret of something else", sec: SecretState{Exists: true, Err: ErrNoCertificate}, now: t0,
			message: "secret tls holds no certificate (no CERTIFICATE block): left alone"},
		{name: "another host's certificate", sec: SecretState{Exists: true, Leaf: leaf(t, life, "other.example")}, now: t0, order: true,
			reason: "the certificate in secret tls does not cover shop.example"},
		{name: "valid", sec: SecretState{Exists: true, Leaf: good}, now: renew.Add(-time.Second),
			message: "certificate for shop.example valid until 2026-04-01T00:00:00Z; renewed from 2026-03-02T00:00:00Z", nextOrder: &renew},
		{name: "renewal due", sec: SecretState{Exists: true, Leaf: good}, now: renew, order: true, reason: "renewal due"},
		{name: "failed, waiting", fail: fail, now: t0, nextOrder: &fail.Next,
			message: "order failed: validating shop.example: 403 unauthorized; next attempt at 2026-01-01T01:00:00Z"},
		{name: "failed, retry due", fail: fail, now: fail.Next, order: true, reason: "no certificate in secret tls"},
		{name: "failed for other hosts", fail: &Failure{Input: "other", Next: t0.Add(time.Hour)}, now: t0, order: true, reason: "no certificate in secret tls"},
	}
	for _, tt := range tests {
		d := Decide(g, tt.sec, tt.fail, tt.now)
		if d.Order != tt.order || d.Reason != tt.reason {
			t.Errorf("%s: order %v (%q), want %v (%q)", tt.name, d.Order, d.Reason, tt.order, tt.reason)
		}
		if !strings.HasPrefix(d.Status.Message, tt.message) {
			t.Errorf("%s: message %q, want it to start %q", tt.name, d.Status.Message, tt.message)
		}
		if !cmp.Equal(d.Status.NextOrder, tt.nextOrder) {
			t.Errorf("%s: nextOrder %v, want %v", tt.name, d.Status.NextOrder, tt.nextOrder)
		}
		if tt.sec.Leaf != nil && (d.Status.Expires == nil || !d.Status.Expires.Equal(tt.sec.Leaf.NotAfter)) {
			t.Errorf("%s: expires %v, want the certificate's %v", tt.name, d.Status.Expires, tt.sec.Leaf.NotAfter)
		}
	}
}

// Routes whose Secret the user fills get a status saying whether it holds
// a certificate covering them, and nothing is ordered.
func TestDecideUserSecret(t *testing.T) {
	t.Parallel()
	g := Groups([]*legion.Route{route("ns", "r", "shop.example", "tls", nil)})[0]
	tests := []struct {
		sec  SecretState
		want string
	}{
		{SecretState{}, "secret tls not found: no certificate is served"},
		{SecretState{Exists: true, Err: ErrNoCertificate}, "secret tls holds no certificate (no CERTIFICATE block): none is served"},
		{SecretState{Exists: true, Leaf: leaf(t, time.Hour, "other.example")}, "the certificate in secret tls does not cover shop.example: the proxies do not serve it for that host"},
		{SecretState{Exists: true, Leaf: leaf(t, time.Hour, "shop.example")}, ""},
	}
	for _, tt := range tests {
		d := Decide(g, tt.sec, nil, t0)
		if d.Order || d.Status.Message != tt.want || d.Status.NextOrder != nil {
			t.Errorf("%+v: %+v, want no order and message %q", tt.sec, d, tt.want)
		}
	}
}

// A new leader keeps the wait of a failed order from the route's status.
func TestResumeFailure(t *testing.T) {
	t.Parallel()
	r := route("ns", "r", "shop.example", "tls", le)
	next := t0.Add(time.Hour)
	r.Status = legion.RouteStatus{NextOrder: &next, Message: "order failed: refused; next attempt at 2026-01-01T01:00:00Z"}
	g := Groups([]*legion.Route{r})[0]
	f := ResumeFailure(g, t0)
	if f == nil || f.Err != "refused" || !f.Next.Equal(next) || f.Input != g.input() {
		t.Fatalf("ResumeFailure = %+v", f)
	}
	if ResumeFailure(g, next) != nil {
		t.Error("a wait already over is resumed")
	}
	r.Status.Message = "certificate for shop.example valid"
	if ResumeFailure(g, t0) != nil {
		t.Error("a status that is no failure is resumed as one")
	}
}

func TestHostConflicts(t *testing.T) {
	t.Parallel()
	gs := Groups([]*legion.Route{
		route("b", "shop", "shop.example", "tls", nil),
		route("a", "shop", "shop.example", "tls", nil),
		route("a", "cart", "shop.example", "cart-tls", nil),
		route("a", "blog", "blog.example", "tls", nil),
		route("a", "blog2", "blog.example", "tls", nil), // one Secret: no conflict
	})
	got := HostConflicts(gs)
	want := map[string]string{"shop.example": "routes of shop.example name secrets a/cart-tls, a/tls, b/tls: the proxies serve the first, by route namespace and name, whose certificate covers the name"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("conflicts (-want +got):\n%s", d)
	}
}
