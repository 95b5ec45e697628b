package acme_test

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

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

func certSecret(t *testing.T, name string, hosts ...string) legion.Object {
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
	o, _ := legion.New(legion.KindSecret)
	s := o.(*legion.Secret)
	s.Metadata.Name, s.Metadata.Namespace = name, "default"
	s.Spec.Data = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})...)
	return s
}

// A Route whose Secret is the user's: once the Secret is changed to a
// certificate for another host (admission only sees the Route), the
// leader's controller (started by the leader's work, as in legion daemon)
// says so in the route's status, and says nothing once a covering one is
// back.
func TestStatusFollowsSecret(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Leader: true})
	st := c.Managers[0].Store()
	ctx := context.Background()
	apply := func(objs ...legion.Object) {
		t.Helper()
		if _, err := c.Client().Apply(ctx, objs, client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	o, _ := legion.New(legion.KindRoute)
	r := o.(*legion.Route)
	r.Metadata.Name, r.Metadata.Namespace = "shop", "default"
	r.Spec.Host, r.Spec.Service = "shop.example", "web"
	r.Spec.TLS = &legion.RouteTLS{Secret: "shop-tls"}
	apply(certSecret(t, "shop-tls", "shop.example"), r)
	status := func() legion.RouteStatus {
		o, _, err := st.Get(legion.KindRoute, "default", "shop")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Route).Status
	}
	testcluster.WaitFor(t, "the route's status to give the certificate's expiry", 10*time.Second, func() bool {
		s := status()
		return s.Expires != nil && s.Message == ""
	})
	apply(certSecret(t, "shop-tls", "other.example"))
	testcluster.WaitFor(t, "the route's status to say the certificate does not cover it", 10*time.Second, func() bool {
		return strings.Contains(status().Message, "the certificate in secret shop-tls does not cover shop.example")
	})
	apply(certSecret(t, "shop-tls", "shop.example", "www.shop.example"))
	testcluster.WaitFor(t, "the route's status to clear", 10*time.Second, func() bool {
		s := status()
		return s.Message == "" && s.Expires != nil
	})
	if s := status(); s.NextOrder != nil || len(s.Challenges) != 0 {
		t.Errorf("a user's certificate got %+v, want no order planned", s)
	}

	// Another route of the host naming another Secret: both say so.
	o, _ = legion.New(legion.KindRoute)
	r2 := o.(*legion.Route)
	r2.Metadata.Name, r2.Metadata.Namespace = "cart", "default"
	r2.Spec.Host, r2.Spec.Path, r2.Spec.Service = "shop.example", "/cart", "web"
	r2.Spec.TLS = &legion.RouteTLS{Secret: "cart-tls"}
	apply(r2)
	testcluster.WaitFor(t, "the route's status to report the other Secret", 10*time.Second, func() bool {
		return status().Message == "routes of shop.example name secrets default/cart-tls, default/shop-tls: the proxies serve the first, by route namespace and name, whose certificate covers the name"
	})
}
