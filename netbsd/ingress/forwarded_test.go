package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pires/go-proxyproto"
)

// echoBackend answers with the client-address headers it received.
func echoBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-IP", "Forwarded"} {
			fmt.Fprintf(w, "%s: %s\n", h, r.Header.Get(h))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func bodyOf(t *testing.T, c *http.Client, proxy, host, path string, header http.Header) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+proxy+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The backend learns the client's address: from a peer the route does not
// trust, whatever the client claims in X-Forwarded-For, X-Real-IP or
// Forwarded is replaced by the address it connected from; behind proxies
// the route trusts, the nearest untrusted address of the chain is the
// client, and the scheme the first proxy saw is kept.
func TestClientAddressReachesTheBackend(t *testing.T) {
	t.Parallel()
	be := echoBackend(t)
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "shop", Name: "open", Host: "open.test", Backends: []string{addr(be)}},
		{Namespace: "shop", Name: "behind-lb", Host: "lb.test", Backends: []string{addr(be)},
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}},
	})
	proxy := startProxy(t, p, false)
	c := client(t)
	lies := http.Header{"X-Forwarded-For": {"6.6.6.6"}, "X-Real-Ip": {"6.6.6.6"}, "Forwarded": {"for=6.6.6.6"}, "X-Forwarded-Proto": {"https"}}

	got := bodyOf(t, c, proxy, "open.test", "/", lies)
	want := "X-Forwarded-For: 127.0.0.1\nX-Forwarded-Proto: http\nX-Forwarded-Host: open.test\nX-Real-IP: 127.0.0.1\nForwarded: for=127.0.0.1;host=open.test;proto=http\n"
	if got != want {
		t.Errorf("an untrusted client's claims reached the backend:\n%s\nwant\n%s", got, want)
	}

	chain := http.Header{"X-Forwarded-For": {"203.0.113.7, 10.0.0.1"}, "X-Forwarded-Proto": {"https"}, "Forwarded": {"for=203.0.113.7;proto=https, for=10.0.0.1"}}
	got = bodyOf(t, c, proxy, "lb.test", "/", chain)
	want = "X-Forwarded-For: 203.0.113.7, 10.0.0.1, 127.0.0.1\nX-Forwarded-Proto: https\nX-Forwarded-Host: lb.test\nX-Real-IP: 203.0.113.7\n" +
		"Forwarded: for=203.0.113.7;proto=https, for=10.0.0.1, for=127.0.0.1;host=lb.test;proto=https\n"
	if got != want {
		t.Errorf("behind trusted proxies:\n%s\nwant\n%s", got, want)
	}

	// The same connection (a lane keeps what it sent the request before
	// when it would be the same): the scheme a trusted proxy names, then
	// none, then an untrusted route again.
	for _, tc := range []struct {
		host   string
		header http.Header
		want   string
	}{
		{"lb.test", http.Header{"X-Forwarded-Proto": {"https"}}, "X-Forwarded-For: 127.0.0.1\nX-Forwarded-Proto: https\nX-Forwarded-Host: lb.test\nX-Real-IP: 127.0.0.1\nForwarded: for=127.0.0.1;host=lb.test;proto=https\n"},
		{"lb.test", nil, "X-Forwarded-For: 127.0.0.1\nX-Forwarded-Proto: http\nX-Forwarded-Host: lb.test\nX-Real-IP: 127.0.0.1\nForwarded: for=127.0.0.1;host=lb.test;proto=http\n"},
		{"open.test", lies, "X-Forwarded-For: 127.0.0.1\nX-Forwarded-Proto: http\nX-Forwarded-Host: open.test\nX-Real-IP: 127.0.0.1\nForwarded: for=127.0.0.1;host=open.test;proto=http\n"},
	} {
		if got := bodyOf(t, c, proxy, tc.host, "/", tc.header); got != tc.want {
			t.Errorf("%s with %v:\n%s\nwant\n%s", tc.host, tc.header, got, tc.want)
		}
	}
}

// proxyProtocolBackend reads a PROXY header and then one HTTP request per
// connection, answering "v<version> <source address>".
func proxyProtocolBackend(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				h, err := proxyproto.Read(br)
				if err != nil {
					fmt.Fprintf(conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
					return
				}
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				src, _, _ := h.TCPAddrs()
				body := fmt.Sprintf("v%d %s", h.Version, src.IP)
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}()
		}
	}()
	return l.Addr().String(), conns
}

// Backends that ask for the PROXY protocol get a v1 or v2 header naming
// the client (behind a trusted proxy, the client it names), and every
// request a connection of its own, so no connection carries one client's
// request under another's address.
func TestProxyProtocolTowardBackends(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			be, conns := proxyProtocolBackend(t)
			p := &Proxy{}
			p.SetRoutes([]Route{{Namespace: "db", Name: "pp", Host: "pp.test", Backends: []string{be}, ProxyProtocol: v,
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
			proxy := startProxy(t, p, false)
			c := client(t)
			want := v + " 203.0.113.7"
			for i := range 2 {
				if got := bodyOf(t, c, proxy, "pp.test", "/", http.Header{"X-Forwarded-For": {"203.0.113.7"}}); got != want {
					t.Fatalf("request %d: backend saw %q, want %q", i, got, want)
				}
			}
			if got := bodyOf(t, c, proxy, "pp.test", "/", nil); got != v+" 127.0.0.1" {
				t.Fatalf("a direct client: backend saw %q, want %s 127.0.0.1", got, v)
			}
			if n := conns.Load(); n != 3 {
				t.Errorf("3 requests came over %d backend connections, want one each", n)
			}
		})
	}
}

// A load balancer in front that speaks the PROXY protocol: from an address
// configured as one, the header's client is the one the backend sees, and
// a connection without a header is refused; from anyone else a header is
// refused and plain connections are served.
func TestProxyProtocolFromALoadBalancer(t *testing.T) {
	t.Parallel()
	be := echoBackend(t)
	send := func(t *testing.T, proxy string, header *proxyproto.Header) (string, error) {
		conn, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if header != nil {
			if _, err := header.WriteTo(conn); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: lb.test\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	hdr := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("198.51.100.9"), Port: 40000}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80})

	p := &Proxy{AcceptProxyProtocol: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	p.SetRoutes([]Route{{Namespace: "shop", Name: "lb", Host: "lb.test", Backends: []string{addr(be)}}})
	proxy := startProxy(t, p, false)
	got, err := send(t, proxy, hdr)
	if err != nil || !strings.Contains(got, "X-Forwarded-For: 198.51.100.9\n") || !strings.Contains(got, "X-Real-IP: 198.51.100.9\n") {
		t.Fatalf("through the load balancer: %v\n%s\nwant the header's client 198.51.100.9", err, got)
	}
	if got, err := send(t, proxy, nil); err == nil {
		t.Fatalf("a connection without a PROXY header from the load balancer's address was served:\n%s", got)
	}

	other := &Proxy{AcceptProxyProtocol: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	other.SetRoutes([]Route{{Namespace: "shop", Name: "lb", Host: "lb.test", Backends: []string{addr(be)}}})
	proxy = startProxy(t, other, false)
	if got, err := send(t, proxy, hdr); err == nil {
		t.Fatalf("a PROXY header from an address that is no load balancer was believed:\n%s", got)
	}
	if got, err := send(t, proxy, nil); err != nil || !strings.Contains(got, "X-Forwarded-For: 127.0.0.1\n") {
		t.Fatalf("a plain connection: %v\n%s", err, got)
	}
}

// A route with tls.redirect sends plain HTTP to the same URL in https
// (308, so the method and body are kept), but not a request a trusted
// proxy in front already took over HTTPS.
func TestRedirectToHTTPS(t *testing.T) {
	t.Parallel()
	be := echoBackend(t)
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "shop", Name: "web", Host: "shop.test", Backends: []string{addr(be)}, RedirectHTTPS: true,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	proxy := startProxy(t, p, false)
	c := client(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodPost, "http://"+proxy+"/cart?item=3", strings.NewReader("x"))
	req.Host = "shop.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "https://shop.test/cart?item=3" {
		t.Fatalf("plain HTTP: %d to %q, want 308 to https://shop.test/cart?item=3", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := bodyOf(t, c, proxy, "shop.test", "/", http.Header{"X-Forwarded-Proto": {"https"}}); !strings.Contains(got, "X-Forwarded-Proto: https\n") {
		t.Fatalf("a request a trusted proxy took over HTTPS was not served:\n%s", got)
	}
}
