package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRoundRobinOverThreeBackends(t *testing.T) {
	var backends []string
	for _, name := range []string{"b0", "b1", "b2"} {
		backends = append(backends, addr(namedBackend(t, name)))
	}
	route := Route{Namespace: "ns", Name: "web", Host: "rr.example", Backends: backends}
	p := &Proxy{}
	p.SetRoutes([]Route{route})
	proxyAddr := startProxy(t, p, false)
	c := client(t)
	var got []string
	for range 6 {
		r, _ := get(t, c, "http", proxyAddr, "rr.example", "/", nil)
		got = append(got, r.Backend)
	}
	// The same route set again keeps its place in the rotation.
	p.SetRoutes([]Route{route})
	r, _ := get(t, c, "http", proxyAddr, "rr.example", "/", nil)
	got = append(got, r.Backend)
	want := []string{"b0", "b1", "b2", "b0", "b1", "b2", "b0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("backends in turn (-want +got):\n%s", d)
	}
}

// Each route has its own counter: requests to one do not move another.
func TestRoundRobinCounterPerRoute(t *testing.T) {
	a, b := addr(namedBackend(t, "a")), addr(namedBackend(t, "b"))
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "ns", Name: "one", Host: "one.example", Backends: []string{a, b}},
		{Namespace: "ns", Name: "two", Host: "two.example", Backends: []string{a, b}},
	})
	proxyAddr := startProxy(t, p, false)
	c := client(t)
	var got []string
	for _, host := range []string{"one.example", "two.example", "one.example", "two.example"} {
		r, _ := get(t, c, "http", proxyAddr, host, "/", nil)
		got = append(got, r.Backend)
	}
	if d := cmp.Diff([]string{"a", "a", "b", "b"}, got); d != "" {
		t.Errorf("backends (-want +got):\n%s", d)
	}
}

func TestClosedBackendIsBadGateway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{closed}}})
	proxyAddr := startProxy(t, p, false)
	got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil)
	if got.Status != http.StatusBadGateway {
		t.Errorf("status %d, want 502", got.Status)
	}
}

func TestSlowBackendIsGatewayTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	p := &Proxy{HeaderTimeout: 200 * time.Millisecond}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{addr(slow)}}})
	proxyAddr := startProxy(t, p, false)
	got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil)
	if got.Status != http.StatusGatewayTimeout {
		t.Errorf("status %d, want 504", got.Status)
	}
}

func TestForwardedHeaders(t *testing.T) {
	be := addr(namedBackend(t, "web"))
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{be}}})
	proxyAddr := startProxy(t, p, false)
	// A client's own X-Forwarded-For is not trusted: this proxy is the edge.
	_, h := get(t, client(t), "http", proxyAddr, "A.example:8080", "/", http.Header{"X-Forwarded-For": {"203.0.113.9"}})
	got := map[string]string{
		"Host":              h.Get("X-Seen-Host"),
		"X-Forwarded-For":   h.Get("X-Seen-Forwarded-For"),
		"X-Forwarded-Host":  h.Get("X-Seen-Forwarded-Host"),
		"X-Forwarded-Proto": h.Get("X-Seen-Forwarded-Proto"),
	}
	want := map[string]string{
		"Host":              "A.example:8080",
		"X-Forwarded-For":   "127.0.0.1",
		"X-Forwarded-Host":  "A.example:8080",
		"X-Forwarded-Proto": "http",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("headers the backend saw (-want +got):\n%s", d)
	}
}

// upgradeBackend switches to protocol "echo" and then echoes every line.
func upgradeBackend(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "echo") {
			http.Error(w, "upgrade expected", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			rw.WriteString("echo: " + line)
			rw.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dialUpgrade opens a raw connection through the proxy and upgrades it.
func dialUpgrade(t *testing.T, proxyAddr string) (net.Conn, *bufio.Reader) {
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: ws.example\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("upgrade answered %s, Upgrade %q; want 101 and echo", resp.Status, resp.Header.Get("Upgrade"))
	}
	return conn, br
}

func TestUpgradePassesThrough(t *testing.T) {
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "ws", Host: "ws.example", Backends: []string{addr(upgradeBackend(t))}}})
	proxyAddr := startProxy(t, p, false)
	conn, br := dialUpgrade(t, proxyAddr)
	for _, msg := range []string{"ping\n", "pong\n"} {
		io.WriteString(conn, msg)
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != "echo: "+msg {
			t.Errorf("got %q, want %q", got, "echo: "+msg)
		}
	}
}

// Ending Serve's context closes upgraded connections too, and Serve
// returns once their handlers have.
func TestShutdownClosesUpgradedConnections(t *testing.T) {
	p := &Proxy{GracePeriod: 100 * time.Millisecond}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "ws", Host: "ws.example", Backends: []string{addr(upgradeBackend(t))}}})
	proxyAddr, stop := serveStoppable(t, p)
	conn, br := dialUpgrade(t, proxyAddr)
	if err := stop(10 * time.Second); err != nil {
		t.Errorf("Serve: %v", err)
	}
	io.WriteString(conn, "late\n")
	if line, err := br.ReadString('\n'); err == nil {
		t.Errorf("upgraded connection still open after Serve ended: read %q", line)
	}
}

// A request in flight when Serve's context ends still gets its answer.
func TestShutdownLetsRequestsFinish(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "finished")
	}))
	t.Cleanup(slow.Close)
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{addr(slow)}}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	type answer struct {
		r   result
		err error
	}
	answered := make(chan answer, 1)
	c := client(t)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+l.Addr().String()+"/", nil)
		req.Host = "a.example"
		resp, err := c.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		answered <- answer{r: result{Status: resp.StatusCode, Body: string(body)}, err: err}
	}()
	<-arrived
	cancel()
	// Release the backend only once Serve has stopped taking connections.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("Serve still takes connections after its context ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	a := <-answered
	if a.err != nil {
		t.Fatal(a.err)
	}
	if d := cmp.Diff(result{Status: 200, Body: "finished"}, a.r); d != "" {
		t.Errorf("in-flight answer (-want +got):\n%s", d)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestACMEChallenge(t *testing.T) {
	be := addr(namedBackend(t, "web"))
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "ns", Name: "web", Host: "a.example", Path: "/app", Backends: []string{be},
			Challenges: map[string]string{"tok1": "tok1.thumbprint"}},
		{Namespace: "ns", Name: "root", Host: "a.example", Backends: []string{be}},
		{Namespace: "ns", Name: "other", Host: "b.example", Backends: []string{be}},
	})
	proxyAddr := startProxy(t, p, false)
	c := client(t)
	tests := []struct {
		host, path string
		want       result
		wantType   string
	}{
		// Answered for the host whatever route's path the token came with.
		{"a.example:80", "/.well-known/acme-challenge/tok1", result{200, "", "tok1.thumbprint"}, "text/plain"},
		// Other tokens, and the token on another host, go to the backend.
		{"a.example", "/.well-known/acme-challenge/tok2", result{200, "web", "web /.well-known/acme-challenge/tok2"}, "text/plain; charset=utf-8"},
		{"b.example", "/.well-known/acme-challenge/tok1", result{200, "web", "web /.well-known/acme-challenge/tok1"}, "text/plain; charset=utf-8"},
		{"a.example", "/.well-known/acme-challenge/tok1/more", result{200, "web", "web /.well-known/acme-challenge/tok1/more"}, "text/plain; charset=utf-8"},
	}
	for _, tt := range tests {
		got, h := get(t, c, "http", proxyAddr, tt.host, tt.path, nil)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("GET %s%s (-want +got):\n%s", tt.host, tt.path, d)
		}
		if ct := h.Get("Content-Type"); ct != tt.wantType {
			t.Errorf("GET %s%s: Content-Type %q, want %q", tt.host, tt.path, ct, tt.wantType)
		}
	}
}

// Clients may speak HTTP/2 in the clear (by its preface) to Serve.
func TestCleartextHTTP2(t *testing.T) {
	be := addr(namedBackend(t, "web"))
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{be}}})
	proxyAddr := startProxy(t, p, false)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols, TLSClientConfig: &tls.Config{}}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/x", nil)
	req.Host = "a.example"
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	got := fmt.Sprintf("%d %d %s", resp.ProtoMajor, resp.StatusCode, body)
	if got != "2 200 web /x" {
		t.Errorf("got %q, want %q", got, "2 200 web /x")
	}
}
