package main

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
)

// A Route on a real one-node cluster: the node's ingress proxy sends a
// request for the route's host to the service's ready task, and a host
// no route names gets 404. A second route is served over HTTPS with the
// certificate legion create secret tls made from a chain and key kept in
// two files, as kubectl's takes them.
func TestRouteServedByTheIngressProxy(t *testing.T) {
	t.Parallel()
	n, _ := helloCluster(t, helloApp("site", `        env: [{name: NAME, value: "served by the route"}]
`+readyHTTP+`  endpoint:
    ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: legion/v1
kind: Route
metadata: {name: site}
spec: {host: site.test, path: /, service: site}
`), func(o *daemon.Options) { o.IngressListen, o.IngressTLSListen = "127.0.0.1:0", "127.0.0.1:0" })
	if len(n.Ingress) != 2 {
		t.Fatalf("ingress listens at %v, want two addresses (HTTP, HTTPS)", n.Ingress)
	}
	get := func(c *http.Client, url, host string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	waitFor(t, "the route answering", func() bool {
		code, body = get(http.DefaultClient, "http://"+n.Ingress[0]+"/", "site.test")
		return code == http.StatusOK
	})
	if !strings.Contains(body, "served by the route") {
		t.Fatalf("the route answered %d %q", code, body)
	}
	if code, _ := get(http.DefaultClient, "http://"+n.Ingress[0]+"/", "nothing.test"); code != http.StatusNotFound {
		t.Errorf("a host no route names: %d, want 404", code)
	}

	dir := t.TempDir()
	certFile, keyFile, pool := certFiles(t, dir, "secure.test")
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"create", "secret", "tls", "secure-tls", "--cert", certFile, "--key", keyFile}, flags...)...)
	if err != nil || !strings.Contains(out, "secret/secure-tls created") || !strings.Contains(out, "for secure.test, valid until") {
		t.Fatalf("create secret tls: %v\n%s", err, out)
	}
	route := filepath.Join(dir, "route.yaml")
	if err := os.WriteFile(route, []byte("apiVersion: legion/v1\nkind: Route\nmetadata: {name: secure}\nspec: {host: secure.test, path: /, service: site, tls: {secret: secure-tls}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runLegion(t, "", append([]string{"apply", "-f", route}, flags...)...); err != nil {
		t.Fatalf("apply the HTTPS route: %v\n%s", err, out)
	}
	secure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}}}
	t.Cleanup(secure.CloseIdleConnections)
	waitFor(t, "the route answering over HTTPS with the certificate made", func() bool {
		code, body = get(secure, "https://"+n.Ingress[1]+"/", "secure.test")
		return code == http.StatusOK
	})
	if !strings.Contains(body, "served by the route") {
		t.Fatalf("the HTTPS route answered %d %q", code, body)
	}
}

// certFiles writes a self-signed certificate for host and its key to two
// PEM files in dir, and returns them with a pool that trusts the
// certificate.
func certFiles(t *testing.T, dir, host string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host},
		DNSNames: []string{host}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	return certFile, keyFile, pool
}
