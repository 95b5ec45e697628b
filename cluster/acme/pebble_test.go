package acme_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/acme"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/logtest"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
)

const pebbleBin = "/usr/bin/pebble"

// pebble is a running Pebble ACME server.
type pebble struct {
	directory string
	http      *http.Client // trusts the directory's TLS certificate
	mgmt      string
}

// startPebble runs Pebble with its HTTP-01 validation aimed at
// httpPort, resolving names through the DNS server at dnsAddr.
func startPebble(t *testing.T, httpPort int, dnsAddr string) *pebble {
	t.Helper()
	if _, err := os.Stat(pebbleBin); err != nil {
		t.Skipf("Debian's pebble package is not installed (%s): apt-get install pebble", pebbleBin)
	}
	dir := t.TempDir()
	certPEM, keyPEM, pool := selfSigned(t)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen, mgmt := testaddr.Loopback(t), testaddr.Loopback(t)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": httpPort, "tlsPort": freePort(t),
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
	}}
	data, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pebbleBin, "-config", cfgFile, "-dnsserver", dnsAddr)
	// Real validation, without Pebble's random sleeps before it, with
	// every order validated afresh and no nonce refused for practice.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_AUTHZREUSE=0", "PEBBLE_WFE_NONCEREJECT=0")
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("pebble said:\n%s", out.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, "pebble to listen", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(hc.CloseIdleConnections)
	return &pebble{directory: "https://" + listen + "/dir", http: hc, mgmt: mgmt}
}

// roots is Pebble's issuing root, from its management API.
func (p *pebble) roots(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := p.http.Get("https://" + p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if resp.StatusCode != http.StatusOK || !pool.AppendCertsFromPEM(body) {
		t.Fatalf("pebble roots: %s %q", resp.Status, body)
	}
	return pool
}

func freePort(t *testing.T) int {
	_, port, _ := net.SplitHostPort(testaddr.Loopback(t))
	n, _ := strconv.Atoi(port)
	return n
}

// selfSigned is a certificate for 127.0.0.1 that Pebble serves its
// directory with, and a pool trusting it.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebble test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), pool
}

// startDNS answers A 127.0.0.1 for every name under .test except those
// under refused.test, which do not exist; AAAA has no answer, so
// Pebble dials the proxy on IPv4.
func startDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			switch {
			case strings.HasSuffix(q.Name, "refused.test."):
				m.Rcode = dns.RcodeNameError
			case q.Qtype == dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
					A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	t.Cleanup(func() { srv.Shutdown() })
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	return pc.LocalAddr().String()
}

// feedProxy serves the store's routes and their Secrets on an ingress
// proxy as a node's agent does, following every change until the test
// ends.
func feedProxy(t *testing.T, st *store.Store, g *daemon.Ingress) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	feed := func() (uint64, error) {
		at, err := st.Version()
		if err != nil {
			return 0, err
		}
		objs, _, err := st.List(legion.KindRoute, "", nil)
		if err != nil {
			return 0, err
		}
		var routes []*legion.Route
		values := map[string][]byte{}
		for _, o := range objs {
			r := o.(*legion.Route)
			routes = append(routes, r)
			if r.Spec.TLS != nil {
				if s, _, err := st.Get(legion.KindSecret, r.Metadata.Namespace, r.Spec.TLS.Secret); err == nil {
					values[legion.ObjectKey(s)] = s.(*legion.Secret).Spec.Data
				}
			}
		}
		g.Apply(ctx, endpoints.ComputeRoutes(routes, nil), values)
		return at, nil
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			at, err := feed()
			if err != nil {
				return
			}
			st.WaitChange(ctx, at, legion.KindRoute, legion.KindSecret)
		}
	}()
}

// served is the chain the proxy presents for host, verified against
// roots.
func served(t *testing.T, addr, host string, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: host, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// TestPebble is the whole path against a real ACME server: a Route with
// tls.acme gets a certificate validated through the ingress proxy, which
// then serves it; it is renewed once two thirds of its life have passed;
// and an order the authority refuses is reported in the status with the
// next attempt after the first retry delay.
func TestPebble(t *testing.T) {
	t.Parallel()
	dnsAddr := startDNS(t)

	// The ingress proxy under test, on the port Pebble validates on.
	ing := daemon.NewIngress(nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addrs, err := ing.Serve(ctx, "127.0.0.1:0", "127.0.0.1:0", func(_ string, run func(context.Context) error) { go run(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	httpPort, _ := strconv.Atoi(port)
	peb := startPebble(t, httpPort, dnsAddr)

	c := testcluster.New(t, testcluster.Options{})
	st := c.Managers[0].Store()
	feedProxy(t, st, ing)

	var clock struct {
		sync.Mutex
		skew time.Duration
	}
	now := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return time.Now().Add(clock.skew)
	}
	ctl := &acme.Controller{Store: st, HTTPClient: peb.http, Now: now, Retry: time.Minute,
		// The challenge is asked of the proxy under test, as the
		// leader would ask port 80 of the host's name.
		Answered: func(ctx context.Context, ch legion.ACMEChallenge) bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addrs[0]+"/.well-known/acme-challenge/"+ch.Token, nil)
			req.Host = ch.Host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b) == ch.KeyAuthorization
		}}

	route := func(name, host string) legion.Object {
		o, _ := legion.New(legion.KindRoute)
		r := o.(*legion.Route)
		r.Metadata.Name, r.Metadata.Namespace = name, "default"
		r.Spec.Host, r.Spec.Service = host, "web"
		r.Spec.TLS = &legion.RouteTLS{Secret: name + "-tls", ACME: &legion.RouteACME{Email: "ops@shop.test", Directory: peb.directory}}
		return r
	}
	if _, err := c.Client().Apply(ctx, []legion.Object{route("shop", "shop.test")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	getRoute := func(name string) *legion.Route {
		o, _, err := st.Get(legion.KindRoute, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Route)
	}

	// Issuance.
	ctl.Pass(ctx)
	ctl.Wait()
	r := getRoute("shop")
	if r.Status.Expires == nil || r.Status.NextOrder == nil || len(r.Status.Challenges) != 0 {
		t.Fatalf("status after the order: %+v", r.Status)
	}
	roots := peb.roots(t)
	var first *x509.Certificate
	testcluster.WaitFor(t, "the proxy to serve shop.test's certificate", 10*time.Second, func() bool {
		first, err = served(t, addrs[1], "shop.test", roots)
		return err == nil
	})
	if !first.NotAfter.Equal(*r.Status.Expires) {
		t.Errorf("served certificate expires %v, status says %v", first.NotAfter, *r.Status.Expires)
	}
	if want := acme.RenewAt(first); !r.Status.NextOrder.Equal(want) {
		t.Errorf("nextOrder %v, want two thirds into the life: %v", *r.Status.NextOrder, want)
	}
	account, _, err := st.Get(legion.KindSecret, legion.SystemNamespace, acme.AccountSecret(peb.directory, "ops@shop.test"))
	if err != nil {
		t.Fatalf("account key secret: %v", err)
	}
	if !strings.Contains(string(account.(*legion.Secret).Spec.Data), "Account: https://") {
		t.Errorf("account secret without the account's URL:\n%s", account.(*legion.Secret).Spec.Data)
	}
	// Nothing is due: a pass orders nothing.
	ctl.Pass(ctx)
	ctl.Wait()
	if again := getRoute("shop"); !again.Status.Expires.Equal(*r.Status.Expires) {
		t.Errorf("a pass before the renewal changed the certificate: %v", again.Status)
	}

	// Renewal: the clock passes nextOrder. A new controller (a new
	// leader) renews with the stored account, registering none.
	clock.Lock()
	clock.skew = r.Status.NextOrder.Sub(time.Now()) + time.Minute
	clock.Unlock()
	ctl = &acme.Controller{Store: st, HTTPClient: ctl.HTTPClient, Now: now, Retry: ctl.Retry, Answered: ctl.Answered}
	ctl.Pass(ctx)
	ctl.Wait()
	if again, _, err := st.Get(legion.KindSecret, legion.SystemNamespace, acme.AccountSecret(peb.directory, "ops@shop.test")); err != nil ||
		again.GetMetadata().Version != account.GetMetadata().Version {
		t.Errorf("the account secret was written again by the renewal (%v)", err)
	}
	clock.Lock()
	clock.skew = 0
	clock.Unlock()
	// The renewed certificate's life may end when the first's did (Pebble
	// gives the same expiry to certificates issued a second or two
	// apart): the status is the issued one again, the next order no
	// earlier; the new serial is checked where it is served, below.
	renewed := getRoute("shop")
	if renewed.Status.NextOrder == nil || renewed.Status.NextOrder.Before(*r.Status.NextOrder) ||
		len(renewed.Status.Challenges) != 0 || !strings.HasPrefix(renewed.Status.Message, "certificate for shop.test valid until") {
		t.Fatalf("status after the renewal: %+v (before: %+v)", renewed.Status, r.Status)
	}
	testcluster.WaitFor(t, "the proxy to serve the renewed certificate", 10*time.Second, func() bool {
		cert, err := served(t, addrs[1], "shop.test", roots)
		return err == nil && cert.SerialNumber.Cmp(first.SerialNumber) != 0
	})

	// Refusal: Pebble cannot resolve the host, so validation fails.
	if _, err := c.Client().Apply(ctx, []legion.Object{route("bad", "shop.refused.test")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	ctl.Pass(ctx)
	ctl.Wait()
	bad := getRoute("bad")
	if !strings.HasPrefix(bad.Status.Message, "order failed: validating shop.refused.test") || bad.Status.NextOrder == nil ||
		!bad.Status.NextOrder.After(now()) || bad.Status.NextOrder.After(now().Add(time.Minute)) || len(bad.Status.Challenges) != 0 {
		t.Fatalf("status of a refused order: %+v", bad.Status)
	}
	if _, _, err := st.Get(legion.KindSecret, "default", "bad-tls"); err == nil {
		t.Error("a refused order stored a secret")
	}
	if _, err := served(t, addrs[1], "shop.refused.test", roots); err == nil {
		t.Error("the proxy serves a certificate for a host whose order failed")
	}

	// Fairness: a route of another namespace names a directory that never
	// answers (any route may name one). Its order holds up its own
	// namespace's next one, which says so, and no other namespace's.
	silent := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-silent:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(silent) }) // runs before hang.Close
	inOther := func(name, host string) legion.Object {
		r := route(name, host).(*legion.Route)
		r.Metadata.Namespace = "blocked" // before default: its groups come first in a pass
		r.Spec.TLS.ACME.Directory = hang.URL + "/directory"
		return r
	}
	// A pass takes a namespace's groups in the order of their secrets:
	// a-stuck's order starts, and b-waits' waits for it.
	if _, err := c.Client().Apply(ctx, []legion.Object{inOther("a-stuck", "stuck.test"), inOther("b-waits", "waits.test")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Apply(ctx, []legion.Object{route("fast", "fast.test")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	ctl = &acme.Controller{Store: st, HTTPClient: ctl.HTTPClient, Now: now, Retry: ctl.Retry, Answered: ctl.Answered}
	ctl.Pass(octx)
	testcluster.WaitFor(t, "fast.test's certificate, while another namespace's order hangs", 30*time.Second, func() bool {
		return strings.HasPrefix(getRoute("fast").Status.Message, "certificate for fast.test valid until")
	})
	other := func(name string) *legion.Route {
		o, _, err := st.Get(legion.KindRoute, "blocked", name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Route)
	}
	if msg := other("a-stuck").Status.Message; !strings.HasPrefix(msg, "ordering a certificate: no certificate in secret a-stuck-tls") {
		t.Errorf("status of the route whose order hangs: %q, want it ordering", msg)
	}
	if msg, want := other("b-waits").Status.Message, "the order for secret a-stuck-tls of this namespace runs first"; !strings.HasPrefix(msg, "waiting to order a certificate") ||
		!strings.Contains(msg, want) {
		t.Errorf("status of the namespace's other route: %q, want it waiting, saying %q", msg, want)
	}
	stop()
	ctl.Wait()
}
