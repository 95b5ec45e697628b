package loopback

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMap(t *testing.T) {
	for in, want := range map[string]string{"10.200.3.17": "127.200.3.17", "10.201.0.5": "127.201.0.5"} {
		got, err := Map(netip.MustParseAddr(in))
		if err != nil || got.String() != want {
			t.Errorf("Map(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := Map(netip.MustParseAddr("fd00::1")); err == nil {
		t.Error("an IPv6 address was mapped")
	}
}

// backend answers each line with its name and the line.
func backend(t *testing.T, name string) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s %s", name, line)
				}
			}()
		}
	}()
	return l.Addr().String(), func() { l.Close(); wg.Wait() }
}

func startProxy(t testing.TB, backends ...string) (*Proxy, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{DialTimeout: time.Second}
	p.SetBackends(backends)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p, l.Addr().String()
}

func ask(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, line)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(got)
}

func TestProxyBalancesRoundRobin(t *testing.T) {
	a, stopA := backend(t, "a")
	defer stopA()
	b, stopB := backend(t, "b")
	defer stopB()
	c, stopC := backend(t, "c")
	defer stopC()
	_, addr := startProxy(t, a, b, c)
	count := map[string]int{}
	for range 9 {
		reply := ask(t, addr, "hi")
		name, rest, _ := strings.Cut(reply, " ")
		if rest != "hi" {
			t.Fatalf("reply %q", reply)
		}
		count[name]++
	}
	if count["a"] != 3 || count["b"] != 3 || count["c"] != 3 {
		t.Fatalf("connections per backend %v, want 3 each", count)
	}
}

func TestProxySkipsDeadBackendsAndDrainsSoftly(t *testing.T) {
	a, stopA := backend(t, "a")
	defer stopA()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	p, addr := startProxy(t, deadAddr, a)
	for range 4 {
		if got := ask(t, addr, "x"); got != "a x" {
			t.Fatalf("with one dead backend: %q", got)
		}
	}
	// An open connection keeps its backend when the endpoints change.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	fmt.Fprintln(conn, "1")
	if l, _ := r.ReadString('\n'); strings.TrimSpace(l) != "a 1" {
		t.Fatalf("first line %q", l)
	}
	b, stopB := backend(t, "b")
	defer stopB()
	p.SetBackends([]string{b})
	fmt.Fprintln(conn, "2")
	if l, _ := r.ReadString('\n'); strings.TrimSpace(l) != "a 2" {
		t.Fatalf("an open connection moved: %q", l)
	}
	if got := ask(t, addr, "y"); got != "b y" {
		t.Fatalf("a new connection after the change: %q", got)
	}
	p.SetBackends(nil)
	if got := ask(t, addr, "z"); !strings.HasPrefix(got, "error") {
		t.Fatalf("with no endpoints the connection should close, got %q", got)
	}
}

func TestProxyPassesHalfClose(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		data, _ := io.ReadAll(c) // until the client's half-close
		c.Write([]byte(strings.ToUpper(string(data))))
	}()
	defer func() { l.Close(); <-done }()
	_, addr := startProxy(t, l.Addr().String())
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("request"))
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "REQUEST" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// BenchmarkProxyHTTP compares HTTP requests per second through the VIP
// proxy with requests sent straight to the one backend.
func BenchmarkProxyHTTP(b *testing.B) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(l)
	defer srv.Close()
	_, proxied := startProxy(b, l.Addr().String())
	for _, target := range []struct{ name, addr string }{{"direct", l.Addr().String()}, {"proxy", proxied}} {
		b.Run(target.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			url := "http://" + target.addr + "/"
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}

// BenchmarkProxyBulk compares a bulk transfer through the VIP proxy with
// one sent straight to the backend, which reads it all and answers with
// how much it read.
func BenchmarkProxyBulk(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var sinks sync.WaitGroup
	defer sinks.Wait()
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			sinks.Go(func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				fmt.Fprint(c, n)
			})
		}
	}()
	_, proxied := startProxy(b, l.Addr().String())
	const size = 64 << 20
	chunk := make([]byte, 256<<10)
	for _, target := range []struct{ name, addr string }{{"direct", l.Addr().String()}, {"proxy", proxied}} {
		b.Run(target.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				c, err := net.Dial("tcp", target.addr)
				if err != nil {
					b.Fatal(err)
				}
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				c.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(got) != fmt.Sprint(size) {
					b.Fatalf("the backend read %q bytes (%v), want %d", got, err, size)
				}
			}
		})
	}
}
