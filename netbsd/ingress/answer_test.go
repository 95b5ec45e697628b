package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Answers as common servers send them (nginx, Go's net/http, Apache,
// Node): the lane passes them on as they are, not through
// http.ReadResponse; were it to decline them, the proxy would still work,
// only slower, so this is what holds the fast path in place.
func TestUsualAnswersArePassedAsTheyAre(t *testing.T) {
	for _, tc := range []struct {
		name, method, head string
		verbatim           bool // written in one piece
	}{
		{"nginx", "GET", "HTTP/1.1 200 OK\r\nServer: nginx/1.26.3\r\nDate: Thu, 03 Dec 2026 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 615\r\nLast-Modified: Tue, 01 Dec 2026 10:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6740-267\"\r\nAccept-Ranges: bytes\r\n\r\n", false},
		{"net/http", "GET", "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Thu, 03 Dec 2026 00:00:00 GMT\r\nContent-Length: 5\r\n\r\n", true},
		{"apache 404", "GET", "HTTP/1.1 404 Not Found\r\nDate: Thu, 03 Dec 2026 00:00:00 GMT\r\nServer: Apache/2.4.62 (Debian)\r\nContent-Length: 196\r\nKeep-Alive: timeout=5, max=100\r\nConnection: Keep-Alive\r\nContent-Type: text/html; charset=iso-8859-1\r\n\r\n", false},
		{"node, closing", "GET", "HTTP/1.1 503 Service Unavailable\nX-Powered-By: Express\nContent-Length: 0\nConnection: close\n\n", false},
		{"HEAD without length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := headLength([]byte(tc.head)); n != len(tc.head) {
				t.Fatalf("head of %d bytes found %d long", len(tc.head), n)
			}
			a, ok := parseAnswerHead([]byte(tc.head), tc.method)
			if !ok {
				t.Fatalf("declined:\n%s", tc.head)
			}
			if a.verbatim != tc.verbatim {
				t.Fatalf("verbatim %v, want %v", a.verbatim, tc.verbatim)
			}
		})
	}
}

// The answers left to http.ReadResponse.
func TestUnusualAnswersAreLeftToNetHTTP(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n", // the body ends with the connection
		"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: folded\r\n  on\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A : spaced\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: X-Secret\r\nX-Secret: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTrailer: X-T\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nPragma: no-cache\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: a\x00b\r\n\r\n",
		"HTTP/1.1 200OK\r\nContent-Length: 1\r\n\r\n",
	} {
		if a, ok := parseAnswerHead([]byte(head), "GET"); ok {
			t.Errorf("taken as %+v:\n%q", a, head)
		}
	}
}

// Whatever a backend sends, an answer head the lane takes is one
// http.ReadResponse reads alike (status, length, whether the connection
// closes), and the lane writes to the client the head the net/http path
// writes for it (lines compared in any order, Date left out when the
// backend sent none).
func FuzzAnswerHead(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"), false)
	f.Add([]byte("HTTP/1.1 404 Not Found\nkeep-alive: timeout=5\ncontent-length: 0\nConnection: keep-alive, close\nx-a:\tb \n\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nDate: x\r\nA: 1\r\na: 2\r\nUpgrade: h2c\r\nTe: trailers\r\n\r\n"), true)
	f.Add([]byte("HTTP/1.1 599 \r\nContent-Length: 18446744073709551615\r\nPragma: no-cache\r\nCache-Control: no-store\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX: \x80\xff\r\n\r\n"), false)
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		n := headLength(b)
		if n == 0 {
			return
		}
		a, ok := parseAnswerHead(b[:n], method)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%q taken as %+v, but http.ReadResponse: %v", b[:n], a, err)
		}
		wantLength := resp.ContentLength
		if got := fmt.Sprint(a.status, a.length, a.close); got != fmt.Sprint(resp.StatusCode, wantLength, resp.Close) {
			t.Fatalf("%q: lane reads status, length, close %s; ReadResponse %d %d %v", b[:n], got, resp.StatusCode, wantLength, resp.Close)
		}
		// The net/http path's head (forward's, after ReadResponse).
		removeHopByHop(resp.Header)
		if method != http.MethodHead {
			if _, ok := resp.Header["Content-Length"]; !ok {
				resp.Header["Content-Length"] = []string{fmt.Sprint(resp.ContentLength)}
			}
		}
		written := func(write func(ln *lane)) []string {
			var out bytes.Buffer
			ln := &lane{bw: bufio.NewWriter(&out)}
			write(ln)
			ln.bw.Flush()
			var lines []string
			for l := range strings.SplitSeq(out.String(), "\r\n") {
				if a.date || !strings.HasPrefix(l, "Date: ") {
					lines = append(lines, l)
				}
			}
			slices.Sort(lines)
			return lines
		}
		got := written(func(ln *lane) { ln.writeAnswerHead(b[:n], a, false) })
		want := written(func(ln *lane) { ln.writeHeader(resp.StatusCode, resp.Header, false) })
		if !slices.Equal(got, want) {
			t.Fatalf("%q: lane writes\n%q\nthe net/http path\n%q", b[:n], got, want)
		}
	})
}

// scriptedBackend answers each request it reads on a connection with the
// next of answers (the same connection or not), and counts connections.
func scriptedBackend(t *testing.T, answers ...string) (addr string, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conns = &atomic.Int32{}
	var next atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					i := int(next.Add(1)) - 1
					if i >= len(answers) {
						return
					}
					if _, err := io.WriteString(c, answers[i]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String(), conns
}

// Through a lane, answers passed as they are reach the client with their
// fields (names in canonical form), without the hop-by-hop ones, with
// their whole body however large, and a backend's "Connection: close"
// ends the use of its connection.
func TestLanePassesAnswersOn(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20000) // 320,000 bytes, many reads
	be, conns := scriptedBackend(t,
		"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nX-backend: one\r\nKeep-Alive: timeout=5\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 201 Created\r\nContent-Length: "+fmt.Sprint(len(big))+"\r\nConnection: close\r\n\r\n"+big,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nUpgrade: h2c\r\n\r\nnew",
	)
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "a.example", Backends: []string{be}}})
	proxy := startProxy(t, p, false)
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var got []string
	for range 3 {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Header.Del("Date")
		got = append(got, fmt.Sprintf("%d %v %d %.16s", resp.StatusCode, resp.Header, len(body), body))
	}
	want := []string{
		"200 map[Content-Length:[5] Content-Type:[text/plain] X-Backend:[one]] 5 hello",
		fmt.Sprintf("201 map[Content-Length:[%d]] %d 0123456789abcdef", len(big), len(big)),
		"200 map[Content-Length:[3]] 3 new",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("answers\n%q\nwant\n%q", got, want)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d backend connections, want 2 (the second answer closed the first)", n)
	}
	if n := p.handedOver.Load(); n != 0 {
		t.Fatalf("%d connections handed to net/http, want none", n)
	}
}
