package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// ParseCertificate reads Secrets users write: whatever the bytes, it either
// fails or gives a certificate with its leaf parsed.
func FuzzParseCertificate(f *testing.F) {
	ca := newTestCA(f)
	f.Add(ca.leafPEM(f, 2, "a.example"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCertificate(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "certificate PEM: ") {
				t.Errorf("error %q does not say it is about the certificate PEM", err)
			}
			return
		}
		if c.Leaf == nil || len(c.Certificate) == 0 || c.PrivateKey == nil {
			t.Errorf("certificate without leaf, chain or key: %+v", c)
		}
	})
}

// Whatever the route and request paths, a match is whole segments: the
// request path is the prefix or continues it with "/".
func FuzzPathMatches(f *testing.F) {
	f.Add("/shop", "/shopping")
	f.Add("/shop/", "/shop/cart")
	f.Add("", "/")
	f.Fuzz(func(t *testing.T, routePath, path string) {
		prefix := normalisePath(routePath)
		got := pathMatches(prefix, path)
		want := prefix == "/" || path == prefix || strings.HasPrefix(path, prefix+"/")
		if got != want {
			t.Errorf("pathMatches(%q, %q) = %v, want %v", prefix, path, got, want)
		}
	})
}

// A lane parses the head headLength finds in place of the whole stream:
// whatever the bytes, parsing the head gives what parsing the stream
// gives, and a stream whose head headLength does not find (it waits for
// more) does not parse either.
func FuzzHeadLength(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\nHost: a.example\n\nGET /next HTTP/1.1\r\n"))
	f.Add([]byte("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("GET / HTTP/1.1\r\nFolded: a\r\n b\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headLength(b)
		whole, wholeErr := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if n == 0 {
			if wholeErr == nil {
				t.Fatalf("headLength found no head in %q, which parses", b)
			}
			return
		}
		head, headErr := parseHead(b[:n])
		if (headErr == nil) != (wholeErr == nil) {
			t.Fatalf("%q: head parses %v, whole stream %v", b, headErr, wholeErr)
		}
		if headErr != nil {
			return
		}
		got := fmt.Sprint(head.Method, head.RequestURI, head.Proto, head.Host, head.Header, head.ContentLength, head.TransferEncoding, head.Close)
		want := fmt.Sprint(whole.Method, whole.RequestURI, whole.Proto, whole.Host, whole.Header, whole.ContentLength, whole.TransferEncoding, whole.Close)
		if got != want {
			t.Errorf("%q: head parses to %s, whole stream to %s", b, got, want)
		}
	})
}

// A lane writes the requests it takes, made ready for the backend, as
// Request.Write would: the same request line and Host, and the same
// header lines (in another order).
func FuzzWriteRequest(f *testing.F) {
	f.Add([]byte("GET /a?b=c HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nUser-Agent: curl\r\n\r\n"))
	f.Add([]byte("OPTIONS /x HTTP/1.1\r\nHost: a.example:8080\r\nA: 1\r\nA: 2\r\n\r\n"))
	f.Add([]byte("HEAD /%7Eme HTTP/1.1\r\nHost: [::1]:80\r\nUser-Agent:\r\nTrailer: x\r\n\r\n"))
	f.Add([]byte("GET /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"))
	// A folded line of blanks leaves a value ending in a space, which
	// Request.Write trims (found by the fuzzer).
	f.Add([]byte("OPTIONS /0 HTTP/1.1\r\nHost:0000000000\n0:000\n  \n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		req, err := parseHead(head)
		if err != nil || !plainRequest(req) {
			return
		}
		req.RemoteAddr = "192.0.2.1:1234"
		h := hopOf(req, nil)
		toBackend(req, "192.0.2.2:80")
		var lane, std bytes.Buffer
		bw := bufio.NewWriter(&lane)
		if err := writeRequest(req, h.appendForwarding(nil, req.Host), bw); err != nil {
			t.Fatal(err)
		}
		bw.Flush()
		h.setHeaders(req.Host, req.Header) // as ReverseProxy's Rewrite does
		if err := req.Write(&std); err != nil {
			t.Fatalf("%q: Request.Write: %v", head, err)
		}
		if got, want := headLines(lane.String()), headLines(std.String()); got != want {
			t.Errorf("%q: lane wrote\n%s\nRequest.Write\n%s", head, got, want)
		}
	})
}

// headLines is a request head with its header lines sorted.
func headLines(s string) string {
	lines := strings.Split(s, "\r\n")
	if len(lines) > 2 {
		slices.Sort(lines[2:])
	}
	return strings.Join(lines, "\n")
}
