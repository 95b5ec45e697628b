package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"testing"
)

// Requests as clients send them: read without http.ReadRequest, and on a
// connection's next requests without making their strings again.
func TestUsualRequestsAreReadByTheLane(t *testing.T) {
	for _, tc := range []struct{ name, head string }{
		{"curl", "GET /index.html HTTP/1.1\r\nHost: a.example\r\nUser-Agent: curl/8.14.1\r\nAccept: */*\r\n\r\n"},
		{"wrk", "GET / HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"},
		{"browser", "GET /shop/cart?id=7 HTTP/1.1\r\nHost: a.example\r\nConnection: keep-alive\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
			"Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-GB,en;q=0.9\r\n" +
			"Cookie: session=abc; theme=dark\r\nIf-None-Match: \"6740-267\"\r\n\r\n"},
		{"HEAD, bare newlines", "HEAD /health HTTP/1.1\nHost: a.example\nAccept: */*\n\n"},
		{"OPTIONS", "OPTIONS /api HTTP/1.1\r\nHost: a.example\r\nOrigin: https://b.example\r\nAccess-Control-Request-Method: GET\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var words laneWords
			if _, ok := parseLaneRequest([]byte(tc.head), &words); !ok {
				t.Fatalf("declined:\n%s", tc.head)
			}
			lane := testing.AllocsPerRun(100, func() { parseLaneRequest([]byte(tc.head), &words) })
			std := testing.AllocsPerRun(100, func() { parseHead([]byte(tc.head)) })
			// The request, its URL, the header map and its values, and
			// none for the fields' strings, kept from the request before.
			if lane > 8 || lane >= std {
				t.Fatalf("%v allocations for a request read before on the connection (http.ReadRequest: %v), want at most 8 and fewer", lane, std)
			}
		})
	}
}

// The requests left to http.ReadRequest.
func TestUnusualRequestsAreLeftToNetHTTP(t *testing.T) {
	for _, head := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
		"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Secret\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: folded\r\n  on\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A : spaced\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		if req, ok := parseLaneRequest([]byte(head), &laneWords{}); ok {
			t.Errorf("taken as %s %s:\n%q", req.Method, req.RequestURI, head)
		}
	}
}

// Whatever the bytes, a request head the lane reads itself is one
// http.ReadRequest reads alike, field for field, on a fresh connection
// and on one whose strings are kept from the same request before.
func FuzzLaneRequest(f *testing.F) {
	f.Add([]byte("GET /a?b=c HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nuser-agent: curl\r\n\r\n"))
	f.Add([]byte("HEAD /%7Eme HTTP/1.1\nHost: [::1]:80\nX: 1\nx: 2\nConnection: keep-alive, Keep-Alive\n\n"))
	f.Add([]byte("OPTIONS /x HTTP/1.1\r\nHost:\r\nA:\t b \r\nPragma: no-cache\r\nCache-Control: no-cache\r\n\r\n"))
	f.Add([]byte("GET //b/c HTTP/1.1\r\nHost: a\r\nX: \x80\xff\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headLength(b)
		if n == 0 {
			return
		}
		head := b[:n]
		var words laneWords
		got, ok := parseLaneRequest(head, &words)
		if !ok {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("%q read by the lane, but http.ReadRequest: %v", head, err)
		}
		show := func(r *http.Request) string {
			return fmt.Sprint(r.Method, " ", r.RequestURI, " ", r.URL.String(), " ", r.URL.Path, " ", r.URL.RawQuery, " ", r.Proto,
				r.ProtoMajor, r.ProtoMinor, " ", r.Host, " ", r.Header, " ", r.ContentLength, r.TransferEncoding, r.Close, r.Body == http.NoBody, r.Trailer)
		}
		if show(got) != show(want) {
			t.Fatalf("%q:\nlane     %s\nnet/http %s", head, show(got), show(want))
		}
		again, _ := parseLaneRequest(head, &words)
		if show(again) != show(want) {
			t.Fatalf("%q read again:\nlane     %s\nnet/http %s", head, show(again), show(want))
		}
	})
}
