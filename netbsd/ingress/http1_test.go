package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// methodEcho answers with the method, path, body and the X-Forwarded-Proto
// it got, and the header X-Big's length.
func methodEcho(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q %s %d", r.Method, r.URL.Path, body, r.Header.Get("X-Forwarded-Proto"), len(r.Header.Get("X-Big")))
	}))
	t.Cleanup(srv.Close)
	return addr(srv)
}

// newRequest is a request for a.example at url: a POST's body is "x", a
// GET has none.
func newRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("x")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "a.example"
	return req
}

// readAnswers reads n answers from br, as "status body".
func readAnswers(t *testing.T, br *bufio.Reader, n int) []string {
	t.Helper()
	var got []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, body))
	}
	return got
}

// A connection's plain requests are served by its lane until one the lane
// does not take (a body); the net/http server then serves that one and
// the rest, pipelined behind it, from the bytes the lane had read.
func TestLaneHandsOverMidConnection(t *testing.T) {
	p := &Proxy{}
	proxyAddr := proxyTo(t, p, methodEcho(t))
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	// Answered one by one first, so the lane has served two before the
	// POST, which comes pipelined with a GET behind it.
	br := bufio.NewReader(conn)
	var got []string
	for _, path := range []string{"/one", "/two"} {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: a.example\r\n\r\n", path)
		got = append(got, readAnswers(t, br, 1)...)
	}
	if n := p.handedOver.Load(); n != 0 {
		t.Fatalf("%d connections handed over after two GETs, want 0 (the lane serves them)", n)
	}
	io.WriteString(conn, "POST /three HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\nhello"+
		"GET /four HTTP/1.1\r\nHost: a.example\r\n\r\n")
	got = append(got, readAnswers(t, br, 2)...)
	want := []string{`200 GET /one "" http 0`, `200 GET /two "" http 0`, `200 POST /three "hello" http 0`, `200 GET /four "" http 0`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("answers (-want +got):\n%s", d)
	}
	if n := p.handedOver.Load(); n != 1 {
		t.Errorf("%d connections handed over, want 1", n)
	}
}

// What a lane does not take, on a connection's first request, gets what
// net/http's server answers: a head larger than the lane's buffer is
// served, requests the server refuses get its 400, HTTP/1.0 is served.
func TestLaneLeavesTheRestToNetHTTP(t *testing.T) {
	proxyAddr := proxyTo(t, nil, methodEcho(t))
	big := strings.Repeat("b", 3*laneBufferSize/2)
	tests := []struct{ name, request, want string }{
		{"head larger than the lane's buffer", "GET /big HTTP/1.1\r\nHost: a.example\r\nX-Big: " + big + "\r\n\r\n",
			fmt.Sprintf(`200 GET /big "" http %d`, len(big))},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", "400 400 Bad Request: missing required Host header"},
		{"bad header name", "GET / HTTP/1.1\r\nHost: a.example\r\nBad Name: x\r\n\r\n", "400 400 Bad Request: invalid header name"},
		{"HTTP/1.0", "GET /old HTTP/1.0\r\nHost: a.example\r\n\r\n", `200 GET /old "" http 0`},
	}
	for _, tt := range tests {
		conn, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(conn, tt.request)
		got := readAnswers(t, bufio.NewReader(conn), 1)[0]
		conn.Close()
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Over TLS, requests a lane serves and those handed over both tell the
// backend the client used https.
func TestLaneAndHandedOverKeepTheScheme(t *testing.T) {
	ca := newTestCA(t)
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{methodEcho(t)}, TLSSecret: "a-tls"}})
	p.SetCertificates(map[string]*tls.Certificate{"ns/a-tls": mustParse(t, ca.leafPEM(t, 2, "a.example"))})
	proxyAddr := startProxy(t, p, true)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "a.example"}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	var got []string
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodGet} {
		req := newRequest(t, method, "https://"+proxyAddr+"/")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, string(body))
	}
	want := []string{`GET / "" https 0`, `POST / "x" https 0`, `GET / "" https 0`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("answers (-want +got):\n%s", d)
	}
	if n := p.handedOver.Load(); n != 1 {
		t.Errorf("%d connections handed over, want 1 (at the POST)", n)
	}
}

// An answer of unknown length reaches the client piece by piece as the
// backend sends it (server-sent events), not once it ends.
func TestLaneStreamsAnswersOfUnknownLength(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	t.Cleanup(srv.Close)
	// Before the server's close (cleanups run last first), which waits for
	// the handler.
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	p := &Proxy{}
	proxyAddr := proxyTo(t, p, addr(srv))
	req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/events", nil)
	req.Host = "a.example"
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "data: first\n" {
		t.Fatalf("first event %q, %v; want it before the backend ends its answer", first, err)
	}
	once.Do(func() { close(release) })
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: second\n\n" {
		t.Errorf("rest %q", rest)
	}
	if p.handedOver.Load() != 0 {
		t.Errorf("handed over: the lane was to serve it")
	}
}

// A backend's answer without Content-Type gets none from the proxy, from
// a lane (GET) or from net/http's server (POST) alike.
func TestNoContentTypeIsMadeUp(t *testing.T) {
	be := rawBackend(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n<html></html>"[:len("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n")+12])
		}
	})
	proxyAddr := proxyTo(t, nil, be)
	c := client(t)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req := newRequest(t, method, "http://"+proxyAddr+"/")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if ct, ok := resp.Header["Content-Type"]; ok {
			t.Errorf("%s: Content-Type %q, want none", method, ct)
		}
		if resp.Header.Get("Date") == "" {
			t.Errorf("%s: no Date", method)
		}
	}
}

// Ending Serve's context closes the connections waiting for their next
// request at once: Serve does not wait out the grace period for them.
func TestShutdownClosesIdleConnectionsAtOnce(t *testing.T) {
	p := &Proxy{GracePeriod: time.Minute}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{methodEcho(t)}}})
	proxyAddr, stop := serveStoppable(t, p)
	if got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil); got.Status != http.StatusOK {
		t.Fatalf("status %d", got.Status)
	}
	// The client keeps its connection, idle; the grace period is a minute.
	if err := stop(30 * time.Second); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// failingListener fails its Accept once failed is closed.
type failingListener struct {
	net.Listener
	failed chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	<-l.failed
	return nil, errors.New("listener broke")
}

// Serve returns early, with its error, when its listener fails, and closes
// the connections it had.
func TestServeReturnsWhenItsListenerFails(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	l := &failingListener{Listener: inner, failed: make(chan struct{})}
	p := &Proxy{GracePeriod: time.Minute}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), l) }()
	close(l.failed)
	select {
	case err := <-done:
		if err == nil || err.Error() != "listener broke" {
			t.Errorf("Serve returned %v, want the listener's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return when its listener failed")
	}
}

// A client that leaves while a stream it asked for is silent: the
// backend's connection is closed at once, not at the stream's next piece.
func TestClientGoneMidStreamClosesBackendConnection(t *testing.T) {
	ended := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // silent until the proxy closes the connection
		ended <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	p := &Proxy{}
	proxyAddr := proxyTo(t, p, addr(srv))
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(conn, "GET /events HTTP/1.1\r\nHost: a.example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if first, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || first != "data: first\n" {
		t.Fatalf("first event %q, %v", first, err)
	}
	conn.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's stream still runs 5 s after the client left")
	}
	if p.handedOver.Load() != 0 {
		t.Errorf("handed over: the lane was to serve it")
	}
}
