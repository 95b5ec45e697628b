package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(backendProcessEnv); name != "" {
		runBackendProcess(name)
		return
	}
	goleak.VerifyTestMain(m)
}

// namedBackend answers every request with its name in X-Backend and the body
// "<name> <path>", and echoes the headers the proxy sets.
func namedBackend(t testing.TB, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(namedHandler(name))
	t.Cleanup(srv.Close)
	return srv
}

func namedHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Forwarded-For", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Seen-Forwarded-Host", r.Header.Get("X-Forwarded-Host"))
		w.Header().Set("X-Seen-Forwarded-Proto", r.Header.Get("X-Forwarded-Proto"))
		io.WriteString(w, name+" "+r.URL.Path)
	})
}

// backendProcessEnv, set to a name, makes the test binary a namedBackend
// process of its own (runBackendProcess) instead of running tests.
const backendProcessEnv = "LEGION_INGRESS_TEST_BACKEND"

// runBackendProcess serves namedHandler(name) on a free loopback port,
// prints the address on stdout, and exits when stdin closes (when the
// test that started it ends, or dies).
func runBackendProcess(name string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(l, namedHandler(name))
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// backendProcess starts namedHandler(name) in a process of its own, so
// that it shares no CPU scheduling (GOMAXPROCS, collector) with the proxy
// measured, and returns its address; it stops when the test ends.
func backendProcess(t testing.TB, name string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), backendProcessEnv+"="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.Process != nil {
			cmd.Wait()
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("backend process printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// addr is a test server's host:port.
func addr(srv *httptest.Server) string { return srv.Listener.Addr().String() }

// startProxy serves p on a loopback port (TLS or not) until the test ends,
// and checks Serve then returns nil.
func startProxy(t testing.TB, p *Proxy, useTLS bool) string {
	t.Helper()
	return serveAt(t, p, useTLS, "127.0.0.1:0").String()
}

// serveAt is startProxy on the address given; it returns the one bound.
func serveAt(t testing.TB, p *Proxy, useTLS bool, at string) net.Addr {
	t.Helper()
	l, err := net.Listen("tcp", at)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if useTLS {
			done <- p.ServeTLS(ctx, l)
		} else {
			done <- p.Serve(ctx, l)
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Serve did not return after its context ended")
		}
	})
	return l.Addr()
}

// serveStoppable serves p on a loopback port; stop ends Serve's context
// and returns what Serve returned, failing the test when Serve takes more
// than within to return.
func serveStoppable(t *testing.T, p *Proxy) (addr string, stop func(within time.Duration) error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	return l.Addr().String(), func(within time.Duration) error {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(within):
			t.Fatalf("Serve did not return within %v of its context's end", within)
			return nil
		}
	}
}

// client is an HTTP/1.1 client whose idle connections close with the test.
func client(t testing.TB) *http.Client {
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// result is what a test compares of a response.
type result struct {
	Status  int
	Backend string
	Body    string
}

// get asks proxyAddr for path with the given Host header.
func get(t testing.TB, c *http.Client, scheme, proxyAddr, host, path string, header http.Header) (result, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+proxyAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s %s: %v", host, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	r := result{Status: resp.StatusCode, Backend: resp.Header.Get("X-Backend")}
	if r.Backend != "" || resp.StatusCode == http.StatusOK {
		r.Body = string(body)
	}
	return r, resp.Header
}
