package ingress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testpoll"
)

// connCounter counts the connections a test backend took and closed.
type connCounter struct{ opened, closed atomic.Int32 }

// countedBackend serves h, counting its connections.
func countedBackend(t *testing.T, h http.Handler) (string, *connCounter) {
	t.Helper()
	var n connCounter
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			n.closed.Add(1)
		}
	}
	t.Cleanup(srv.Close)
	srv.Start()
	return addr(srv), &n
}

// proxyTo starts a proxy (p, or a new one when nil) whose one route sends
// a.example to backend, and returns its address.
func proxyTo(t *testing.T, p *Proxy, backend string) string {
	t.Helper()
	if p == nil {
		p = &Proxy{}
	}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{backend}}})
	return startProxy(t, p, false)
}

// rawBackend accepts connections on a new loopback port and hands each to
// serve on a goroutine of its own; it returns the port's address. The
// test waits for every goroutine after closing the listener.
func rawBackend(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the listener's close, which ends the loop
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(conn) })
		}
	})
	return l.Addr().String()
}

// Requests one after another, GET and HEAD, with a body or none, all go over
// the one kept connection.
func TestBackendConnectionIsKept(t *testing.T) {
	be, n := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			io.WriteString(w, "hello "+r.URL.Path)
		}
	}))
	proxyAddr := proxyTo(t, nil, be)
	c := client(t)
	for _, path := range []string{"/a", "/empty", "/b", "/empty", "/c"} {
		got, _ := get(t, c, "http", proxyAddr, "a.example", path, nil)
		want := result{Status: http.StatusOK, Body: "hello " + path}
		if path == "/empty" {
			want = result{Status: http.StatusNoContent}
		}
		if got != want {
			t.Errorf("GET %s: %+v, want %+v", path, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodHead, "http://"+proxyAddr+"/h", nil)
	req.Host = "a.example"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD: status %d", resp.StatusCode)
	}
	if got := n.opened.Load(); got != 1 {
		t.Errorf("the backend took %d connections for 7 requests, want 1", got)
	}
}

// A backend that closes each connection after its answer, without saying
// so: the next request finds the kept connection closed and is sent again
// on a new one, so the client never sees the closed one.
func TestClosedKeptConnectionIsRetried(t *testing.T) {
	var served atomic.Int32
	be := rawBackend(t, func(conn net.Conn) {
		defer conn.Close()
		if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
			served.Add(1)
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Backend: once\r\n\r\nok")
		}
	})
	proxyAddr := proxyTo(t, nil, be)
	c := client(t)
	for i := range 3 {
		got, _ := get(t, c, "http", proxyAddr, "a.example", "/", nil)
		if want := (result{Status: http.StatusOK, Backend: "once", Body: "ok"}); got != want {
			t.Fatalf("request %d: %+v, want %+v", i, got, want)
		}
	}
	if got := served.Load(); got != 3 {
		t.Errorf("the backend served %d requests, want 3", got)
	}
}

// A backend that answers more than it was asked: the answer nobody asked
// for is not given to the next request; its connection is dropped.
func TestUnaskedAnswerIsNotServed(t *testing.T) {
	be := rawBackend(t, func(conn net.Conn) {
		defer conn.Close()
		br := bufio.NewReader(conn)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"+
				"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
		}
	})
	p := &Proxy{}
	proxyAddr := proxyTo(t, p, be)
	c := client(t)
	for i := range 3 {
		got, _ := get(t, c, "http", proxyAddr, "a.example", "/", nil)
		if got.Status != http.StatusOK || got.Body != "ok" {
			t.Fatalf("request %d: %+v, want 200 ok", i, got)
		}
	}
	p.CloseIdleConnections() // so the backend's connections end before wg.Wait
}

// A backend whose headers do not end within 10 MiB gets its client 502: a
// backend sending headers without end cannot fill the proxy's memory.
func TestEndlessResponseHeadersAreRefused(t *testing.T) {
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		bw.WriteString("HTTP/1.1 200 OK\r\nX-Endless: ")
		chunk := strings.Repeat("x", 64<<10)
		for range 200 { // 12.5 MiB, then a proper end
			if _, err := bw.WriteString(chunk); err != nil {
				return
			}
		}
		bw.WriteString("\r\nContent-Length: 2\r\n\r\nok")
		bw.Flush()
	}))
	proxyAddr := proxyTo(t, nil, be)
	if got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil); got.Status != http.StatusBadGateway {
		t.Errorf("status %d, want 502", got.Status)
	}
}

// A client that goes away while the backend thinks: the backend's
// connection is closed at once (its request's context ends), not when the
// header timeout passes.
func TestClientGoneClosesBackendConnection(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{}, 1)
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		ended <- struct{}{}
	}))
	proxyAddr := proxyTo(t, &Proxy{HeaderTimeout: 20 * time.Second}, be) // longer than the 5 s waited below
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxyAddr+"/", nil)
	req.Host = "a.example"
	errc := make(chan error, 1)
	go func() {
		resp, err := client(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request succeeded after its cancel")
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's request still runs 5 s after the client left")
	}
}

// A client that stops reading an endless answer: the connection to the
// backend is closed, not read to its end (which never comes).
func TestClientGoneMidBodyClosesBackendConnection(t *testing.T) {
	writeFailed := make(chan struct{}, 1)
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				writeFailed <- struct{}{}
				return
			}
		}
	}))
	proxyAddr := proxyTo(t, nil, be)
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
	if _, err := io.ReadFull(conn, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	select {
	case <-writeFailed:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend still writes 5 s after the client left")
	}
}

// Informational answers (103 Early Hints) reach the client before the
// answer, and trailers after its body.
func TestEarlyHintsAndTrailers(t *testing.T) {
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Sum", "42")
	}))
	proxyAddr := proxyTo(t, nil, be)
	var hints []string
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, h.Get("Link"))
			return nil
		},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxyAddr+"/", nil)
	req.Host = "a.example"
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != "body" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("body %q, trailer X-Sum %q; want body, 42", body, resp.Trailer.Get("X-Sum"))
	}
	if len(hints) != 1 || hints[0] != "</style.css>; rel=preload" {
		t.Errorf("early hints %q, want the Link", hints)
	}
}

// A request with a body reaches the backend whole (by the standard
// transport, which writes it while it reads an early answer).
func TestRequestBodyReachesBackend(t *testing.T) {
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // all before answering, as HTTP/1 handlers must
		w.Write(body)
	}))
	proxyAddr := proxyTo(t, nil, be)
	sent := strings.Repeat("payload ", 10000)
	req, _ := http.NewRequest(http.MethodPost, "http://"+proxyAddr+"/", strings.NewReader(sent))
	req.Host = "a.example"
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != sent {
		t.Errorf("echoed %d bytes, want the %d sent", len(got), len(sent))
	}
}

// A backend connection idle for IdleTimeout is closed, so those of a
// backend gone from the routes do not stay open.
func TestIdleBackendConnectionIsClosed(t *testing.T) {
	be, n := countedBackend(t, namedHandler("web"))
	proxyAddr := proxyTo(t, &Proxy{IdleTimeout: 50 * time.Millisecond}, be)
	if got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil); got.Status != http.StatusOK {
		t.Fatalf("status %d", got.Status)
	}
	testpoll.Until(t, "the idle backend connection closed", 5*time.Second, 5*time.Millisecond, func() bool { return n.closed.Load() == 1 })
}

// The backend sees the Accept-Encoding the client sent, none when it sent
// none, and its answer goes back as it is: the proxy neither asks for gzip
// on its own nor unpacks it.
func TestAcceptEncodingIsTheClients(t *testing.T) {
	be, _ := countedBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "accept-encoding="+r.Header.Get("Accept-Encoding"))
	}))
	proxyAddr := proxyTo(t, nil, be)
	tr := &http.Transport{DisableCompression: true} // sends no Accept-Encoding of its own
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	for _, sent := range []string{"", "br"} {
		h := http.Header{}
		if sent != "" {
			h.Set("Accept-Encoding", sent)
		}
		got, _ := get(t, c, "http", proxyAddr, "a.example", "/", h)
		if want := "accept-encoding=" + sent; got.Body != want {
			t.Errorf("client sent %q: backend answered %q, want %q", sent, got.Body, want)
		}
	}
}
