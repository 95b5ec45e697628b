package ingress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// A lane serves the plain requests of one client connection over
// HTTP/1.1: it reads each request with http.ReadRequest, sends it to the
// route's backend on a kept connection (backendTransport) and writes the
// answer back itself, all on the connection's one goroutine.
//
// Why not net/http's server for these: per request it starts a goroutine
// reading in the background, resets deadlines, allocates a response
// writer and a context, and httputil.ReverseProxy clones the request and
// copies the headers twice; on a loaded proxy that is over a third of
// the CPU a request costs (measured against nginx in
// BenchmarkProxyAgainstNginx). Parsing and writing stay the standard
// library's.
//
// A lane takes only what it forwards exactly as ReverseProxy would: GET,
// HEAD and OPTIONS without a body, HTTP/1.1, no upgrade, no Expect, a
// route with a ready backend and no PROXY protocol, and headers net/http's
// server would accept. On the first request that is anything else (a
// body, HTTP/1.0, a WebSocket, an ACME challenge, a 404, a redirect, a
// header too large for its buffer, a parse error), the lane hands the
// connection, with every byte it has read and not served, to the
// net/http server, which serves it from then on.
type lane struct {
	p      *Proxy
	conn   net.Conn
	tls    *tls.ConnectionState // nil on plain HTTP
	remote string
	src    laneSource // what br reads
	br     *bufio.Reader
	bw     *bufio.Writer
	ctx    context.Context    // ends with the connection or the server
	cancel context.CancelFunc // ends ctx
	date   []byte             // scratch for the Date header
	words  laneWords          // the strings of its requests' fields
	// untrusted is how its requests come when the route trusts no proxy
	// at the peer's address (set with the first request).
	untrusted    hop
	untrustedSet bool
	// fwd are the forwarding fields of the request being sent (see
	// forwarding), kept for the next when they would be the same.
	fwd              []byte
	fwdHost, fwdFrom string // the Host and scheme fwd is for
	fwdKept          bool
	write            func(*http.Request, io.Writer) error // writeRequest with fwd
	// backendConn is the backend connection of the request being sent,
	// whose deadline the end of ctx moves to the past (see watchBackend).
	backendConn atomic.Pointer[backendConn]
	watchConn   func(*backendConn) func() bool
	unwatchConn func() bool
	state       atomic.Int32 // laneBusy, laneIdle or laneClosed
	// idleSet is when the idle deadline was last set, zero when another
	// deadline has been set since.
	idleSet time.Time
	watch   *time.Timer   // starts watchClient during a slow round trip
	gone    atomic.Bool   // watchClient saw the client leave
	ended   chan struct{} // watchClient's end
}

// clientWatchDelay is how long a round trip runs before the lane watches
// the client for leaving meanwhile (see watchClient): a backend that
// answers sooner costs no watching.
const clientWatchDelay = 10 * time.Millisecond

// laneSource is the client connection as a lane reads it: the byte
// watchClient read, if it read one, then the connection.
type laneSource struct {
	conn net.Conn
	b    [1]byte
	has  bool
}

func (s *laneSource) Read(p []byte) (int, error) {
	if s.has && len(p) > 0 {
		p[0], s.has = s.b[0], false
		return 1, nil
	}
	return s.conn.Read(p)
}

const (
	laneBusy int32 = iota
	laneIdle
	laneClosed
)

// laneBufferSize is the read and write buffer size of a lane, net/http's
// server's: a request head larger than that goes to net/http, which takes
// heads up to http.DefaultMaxHeaderBytes.
const laneBufferSize = 4 << 10

// serveLane serves c's requests (after a TLS handshake with tlsConfig,
// when not nil) until the client or the server closes it, or hands c over
// to the net/http server (handOver).
func (p *Proxy) serveLane(ctx context.Context, c net.Conn, tlsConfig *tls.Config, set *laneSet, handOver func(net.Conn)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ln := &lane{p: p, conn: c, cancel: cancel}
	ln.write = func(req *http.Request, w io.Writer) error { return writeRequest(req, ln.fwd, w) }
	ln.watchConn, ln.unwatchConn = ln.watchBackend, ln.unwatchBackend
	var tc *tls.Conn
	if tlsConfig != nil {
		tc = tls.Server(c, tlsConfig)
		ln.conn = tc
	}
	// Idle until its first request: a shutdown closes it, handshake or not.
	ln.state.Store(laneIdle)
	if !set.add(ln) {
		c.Close()
		return
	}
	defer set.remove(ln)
	if tc != nil {
		c.SetDeadline(time.Now().Add(clientHeaderTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			// Unknown SNI names and scanners are routine for an edge proxy.
			p.Logger.Debug("ingress: TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
			tc.Close()
			return
		}
		c.SetDeadline(time.Time{})
		state := tc.ConnectionState()
		if state.NegotiatedProtocol == "h2" {
			if ln.state.CompareAndSwap(laneIdle, laneBusy) {
				handOver(tc)
			}
			return
		}
		ln.tls = &state
	}
	ln.remote = c.RemoteAddr().String()
	ln.src.conn = ln.conn
	ln.br = bufio.NewReaderSize(&ln.src, laneBufferSize)
	ln.bw = bufio.NewWriterSize(ln.conn, laneBufferSize)
	// A backend's informational answers (103 Early Hints) go to the client
	// as they come, as ReverseProxy passes them on.
	ln.ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: ln.write1xx})
	// One watch of the context for all of the lane's backend requests,
	// not one each.
	defer context.AfterFunc(ln.ctx, func() {
		if bc := ln.backendConn.Load(); bc != nil {
			bc.conn.SetDeadline(alreadyPast)
		}
	})()
	for {
		if ln.br.Buffered() == 0 {
			if !ln.waitIdle(set) {
				ln.conn.Close()
				return
			}
		} else if !ln.state.CompareAndSwap(laneIdle, laneBusy) && ln.state.Load() == laneClosed {
			return
		}
		head, err := ln.readHead()
		if err != nil {
			ln.conn.Close()
			return
		}
		if head == nil { // larger than the buffer
			ln.handOver(handOver)
			return
		}
		// Parsed where it lies in the buffer, which it leaves only once
		// taken: what the lane declines goes to net/http untouched.
		req, ok := parseLaneRequest(head, &ln.words)
		if !ok {
			if req, err = parseHead(head); err != nil {
				ln.handOver(handOver)
				return
			}
		}
		e, h := ln.takes(req)
		if e == nil {
			ln.handOver(handOver)
			return
		}
		ln.br.Discard(len(head))
		if !ln.forward(req, e, h, set.closing.Load()) || set.closing.Load() {
			ln.conn.Close()
			return
		}
	}
}

// waitIdle waits for the first byte of the next request, the connection
// idle meanwhile (so a shutdown may close it); false when it should end.
func (ln *lane) waitIdle(set *laneSet) bool {
	// The idle deadline is set again only once a second has passed since
	// it was last: moving it costs a lock and a timer, per request.
	if now := time.Now(); now.Sub(ln.idleSet) > time.Second {
		ln.conn.SetReadDeadline(now.Add(clientIdleTimeout))
		ln.idleSet = now
	}
	ln.state.Store(laneIdle)
	if set.closing.Load() && ln.state.CompareAndSwap(laneIdle, laneClosed) {
		return false
	}
	_, err := ln.br.Peek(1)
	if !ln.state.CompareAndSwap(laneIdle, laneBusy) {
		return false // closed by a shutdown
	}
	return err == nil
}

// setReadDeadline sets a read deadline other than the idle one, which
// waitIdle must then set again.
func (ln *lane) setReadDeadline(t time.Time) {
	ln.conn.SetReadDeadline(t)
	ln.idleSet = time.Time{}
}

// readHead returns the request head (request line and headers up to the
// empty line) at the front of the buffer, reading more while it is not
// all there, within clientHeaderTimeout; nil when it would not fit in
// the buffer.
func (ln *lane) readHead() ([]byte, error) {
	deadline := false
	return bufferedHead(ln.br, func() {
		if !deadline {
			ln.setReadDeadline(time.Now().Add(clientHeaderTimeout))
			deadline = true
		}
	})
}

// bufferedHead reads br until the head at its front (headLength's) is in
// its buffer and returns it, calling beforeRead before each read; nil when
// the head does not fit in the buffer.
func bufferedHead(br *bufio.Reader, beforeRead func()) ([]byte, error) {
	for {
		buf, _ := br.Peek(br.Buffered())
		if n := headLength(buf); n > 0 {
			return buf[:n], nil
		}
		if len(buf) == br.Size() {
			return nil, nil
		}
		beforeRead()
		if _, err := br.Peek(len(buf) + 1); err != nil {
			return nil, err
		}
	}
}

// headLength is the length of the head (of a request or an answer) at the
// start of b, through the empty line that ends it ("\r\n" or a bare
// "\n", as net/http reads lines), or 0 when b does not hold all of it.
func headLength(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
	}
}

// headReaders parse request heads for the lanes: one per lane would be
// 4 KiB more per connection, idle ones too.
var headReaders = sync.Pool{New: func() any { return &headReader{br: bufio.NewReaderSize(nil, laneBufferSize)} }}

type headReader struct {
	r  bytes.Reader
	br *bufio.Reader
}

// parseHead parses a request head (headLength's) with http.ReadRequest.
func parseHead(head []byte) (*http.Request, error) {
	hr := headReaders.Get().(*headReader)
	defer headReaders.Put(hr)
	hr.r.Reset(head)
	hr.br.Reset(&hr.r)
	return http.ReadRequest(hr.br)
}

// takes is the route a lane forwards req to, and how req reached the
// proxy; nil when req is for the net/http server (see lane).
func (ln *lane) takes(req *http.Request) (*entry, hop) {
	if !plainRequest(req) || strings.HasPrefix(req.URL.Path, acmePrefix) {
		return nil, hop{}
	}
	e := ln.p.routes.Load().match(requestHost(req.Host), req.URL.Path)
	if e == nil || len(e.route.Backends) == 0 || e.route.ProxyProtocol != "" {
		return nil, hop{}
	}
	req.RemoteAddr, req.TLS = ln.remote, ln.tls
	h := ln.hopOf(req, e.route.TrustedProxies)
	if e.route.RedirectHTTPS && h.proto == "http" {
		return nil, hop{}
	}
	return e, h
}

// hopOf is hopOf(req, trusted) for the lane's requests: the same for all
// while the peer is not trusted.
func (ln *lane) hopOf(req *http.Request, trusted []netip.Prefix) hop {
	if !ln.untrustedSet {
		ln.untrusted, ln.untrustedSet = hopOf(req, nil), true
	}
	if !ln.untrusted.peer.IsValid() || !trusts(trusted, ln.untrusted.peer) {
		return ln.untrusted
	}
	return hopOf(req, trusted)
}

// forwarding makes ln.fwd the forwarding fields h gives a request for
// host, unless they are those of the request before.
func (ln *lane) forwarding(h hop, host string) {
	if ln.fwdKept && h.ownPeer() && ln.fwdHost == host && ln.fwdFrom == h.proto {
		return
	}
	ln.fwd = h.appendForwarding(ln.fwd[:0], host)
	ln.fwdHost, ln.fwdFrom, ln.fwdKept = host, h.proto, h.ownPeer()
}

// plainRequest is a request a lane may forward, whatever its route: GET,
// HEAD or OPTIONS over HTTP/1.1 without a body, upgrade, Expect or
// Connection: close, in origin form, and nothing net/http's server would
// refuse (400) or Request.Write would mend.
func plainRequest(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	if req.ProtoMajor != 1 || req.ProtoMinor < 1 || req.ContentLength != 0 || len(req.TransferEncoding) > 0 || req.Close ||
		req.RequestURI == "*" || req.URL.Host != "" || strings.Contains(req.URL.RawQuery, ";") ||
		req.Header["Upgrade"] != nil || req.Header["Expect"] != nil {
		return false
	}
	// ReadRequest has refused several Host headers and moved the one to
	// req.Host. A zone (fe80::1%eth0) is for Request.Write to drop.
	if req.Host == "" || !httpguts.ValidHostHeader(req.Host) || strings.Contains(req.Host, "%") {
		return false
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// forward sends req, which reached the proxy as h says, to e's next
// backend and writes the answer to the client, as ReverseProxy with the
// route's Rewrite would; false when the connection cannot serve another
// request. closing adds Connection: close to the answer.
func (ln *lane) forward(req *http.Request, e *entry, h hop, closing bool) bool {
	toBackend(req, e.backend())
	ln.forwarding(h, req.Host)
	x, err := ln.roundTrip(req)
	if ln.gone.Load() {
		if err == nil {
			x.abandon()
		}
		return false
	}
	if err != nil {
		status := errorStatus(err)
		level := slog.LevelWarn
		if errors.Is(err, context.Canceled) {
			level = slog.LevelDebug // the server is closing the connection
		}
		ln.p.Logger.Log(ln.ctx, level, "ingress backend failed", "route", e.route.Namespace+"/"+e.route.Name,
			"backend", req.URL.Host, "status", status, "err", err)
		ln.writeHeader(status, http.Header{"Content-Length": {"0"}}, closing)
		return ln.bw.Flush() == nil
	}
	if x.resp == nil {
		return ln.passAnswer(req, x, closing)
	}
	resp := x.resp
	defer resp.Body.Close()
	removeHopByHop(resp.Header)
	if len(resp.Trailer) > 0 {
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		resp.Header["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	if req.Method == http.MethodHead || !bodyAllowed(resp.StatusCode) {
		ln.writeHeader(resp.StatusCode, resp.Header, closing)
		return ln.bw.Flush() == nil
	}
	if resp.ContentLength >= 0 {
		if _, ok := resp.Header["Content-Length"]; !ok {
			// Only when missing: setting a key of a full small map,
			// even one it holds, grows it.
			resp.Header["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
		}
		ln.writeHeader(resp.StatusCode, resp.Header, closing)
		buf := ln.p.buffers.Get()
		defer ln.p.buffers.Put(buf)
		// Through the buffer: bufio.Writer.ReadFrom would hand a large
		// body to the connection's ReadFrom, which allocates its own.
		n, err := io.CopyBuffer(struct{ io.Writer }{ln.bw}, resp.Body, buf)
		// A body cut short cannot be told to the client but by closing.
		return err == nil && n == resp.ContentLength && ln.bw.Flush() == nil
	}
	// A body of unknown length (chunked, or up to the backend's close)
	// goes chunked, each piece as soon as it comes, as ReverseProxy
	// flushes such a body (event streams).
	resp.Header["Transfer-Encoding"] = []string{"chunked"}
	ln.writeHeader(resp.StatusCode, resp.Header, closing)
	if ln.bw.Flush() != nil {
		return false
	}
	buf := ln.p.buffers.Get()
	defer ln.p.buffers.Put(buf)
	// A stream may stay silent for long: the client is watched all along,
	// so one that leaves closes the backend connection at once, not at
	// the stream's next piece.
	ln.watchFrom(0)
	defer ln.unwatch()
	cw := httputil.NewChunkedWriter(ln.bw)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := cw.Write(buf[:n]); werr != nil || ln.bw.Flush() != nil {
				return false
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return false
		}
	}
	cw.Close()
	for k, vv := range resp.Trailer {
		for _, v := range vv {
			writeField(ln.bw, k, v)
		}
	}
	ln.bw.WriteString("\r\n")
	return ln.bw.Flush() == nil
}

// toBackend makes req, as a lane read it, the request to send to backend,
// as ReverseProxy makes it with the routes' Rewrite, but for the
// forwarding headers (forwarding's): hop-by-hop headers and the client's
// forwarding headers dropped.
func toBackend(req *http.Request, backend string) {
	teTrailers := httpguts.HeaderValuesContainsToken(req.Header["Te"], "trailers")
	out := req.Header
	removeHopByHop(out)
	if teTrailers {
		out["Te"] = []string{"trailers"}
	}
	// hopOf has read what of them the route trusts.
	for _, k := range forwardingKeys {
		delete(out, k)
	}
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = noUserAgent // none, rather than Go's
	}
	req.URL.Scheme, req.URL.Host = "http", backend
}

// noUserAgent is the User-Agent of a request without one: shared, as the
// header is only read from then on (an append would copy it).
var noUserAgent = []string{""}[:1:1]

// exchange is a backend's answer to a lane's request, its head read: as
// an http.Response, or as it lies in the connection's buffer (answer.go).
type exchange struct {
	resp *http.Response // nil: the answer is the rest
	c    *backendConn
	stop func() bool // c's stop
	head []byte      // in c's buffer
	a    answerHead
}

// abandon closes what the answer is read from.
func (x exchange) abandon() {
	if x.resp != nil {
		x.resp.Body.Close()
		return
	}
	x.c.release(x.stop, false)
}

// roundTrip sends req to its backend and reads the answer's head,
// watching the client meanwhile once that takes clientWatchDelay.
func (ln *lane) roundTrip(req *http.Request) (exchange, error) {
	ln.watchFrom(clientWatchDelay)
	defer ln.unwatch()
	c, stop, err := ln.p.backend.keptAsk(ln.ctx, req, ln.write, ln.watchConn)
	if err != nil {
		return exchange{}, err
	}
	head, err := c.bufferedHead()
	if err != nil {
		return exchange{}, c.fail(ln.ctx, stop, err)
	}
	if head != nil {
		if a, ok := parseAnswerHead(head, req.Method); ok {
			return exchange{c: c, stop: stop, head: head, a: a}, nil
		}
	}
	resp, err := c.readResponse(ln.ctx, req, stop)
	return exchange{resp: resp}, err
}

// passAnswer writes to the client the answer x holds in the backend
// connection's buffer, its body copied from there; false when the
// connection cannot serve another request.
func (ln *lane) passAnswer(req *http.Request, x exchange, closing bool) bool {
	c := x.c
	ln.writeAnswerHead(x.head, x.a, closing)
	c.br.Discard(len(x.head))
	c.lr.n = -1
	n := x.a.length
	if req.Method == http.MethodHead || n < 0 {
		n = 0
	}
	// What the buffer holds (all of a small body) is written from there:
	// no read, and the header deadline, which the next request moves, can
	// stay.
	if b := int64(c.br.Buffered()); b > 0 && n > 0 {
		chunk, _ := c.br.Peek(int(min(b, n)))
		ln.bw.Write(chunk)
		c.br.Discard(len(chunk))
		n -= int64(len(chunk))
	}
	if n > 0 {
		if err := c.conn.SetReadDeadline(time.Time{}); err != nil || ln.ctx.Err() != nil {
			c.release(x.stop, false)
			return false
		}
		buf := ln.p.buffers.Get()
		defer ln.p.buffers.Put(buf)
		// Through the buffer: bufio.Writer.ReadFrom would hand a large
		// body to the connection's ReadFrom, which allocates its own.
		copied, err := io.CopyBuffer(struct{ io.Writer }{ln.bw}, io.LimitReader(c.br, n), buf)
		if err != nil || copied < n {
			// A body cut short cannot be told to the client but by closing.
			c.release(x.stop, false)
			return false
		}
	}
	c.release(x.stop, !x.a.close)
	return ln.bw.Flush() == nil
}

// watchBackend has the end of the lane's context close c, until the
// returned stop, which says whether it did not.
func (ln *lane) watchBackend(c *backendConn) func() bool {
	ln.backendConn.Store(c)
	return ln.unwatchConn
}

func (ln *lane) unwatchBackend() bool {
	ln.backendConn.Store(nil)
	return ln.ctx.Err() == nil
}

// watchFrom has watchClient start after delay.
func (ln *lane) watchFrom(delay time.Duration) {
	if ln.watch == nil {
		ln.ended = make(chan struct{}, 1)
		ln.watch = time.AfterFunc(delay, ln.watchClient)
		return
	}
	ln.watch.Reset(delay)
}

// unwatch stops watchClient, ending its read if it runs and waiting for it.
func (ln *lane) unwatch() {
	if !ln.watch.Stop() {
		ln.setReadDeadline(alreadyPast)
		<-ln.ended
	}
}

// watchClient reads the client connection while its request waits for the
// backend or its answer streams, as net/http's server does: a client that
// closes its connection (or fails) ends the lane's context, which closes
// the connection to the backend at once rather than when the backend
// next answers. A byte it reads (the next request's) is kept for the
// lane.
func (ln *lane) watchClient() {
	defer func() { ln.ended <- struct{}{} }()
	n, err := ln.conn.Read(ln.src.b[:])
	if n == 1 {
		ln.src.has = true
		return
	}
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		ln.gone.Store(true)
		ln.cancel()
	}
}

// writeRequest writes a request a lane took, with the forwarding fields
// fwd, as Request.Write would with them in its header (a test holds them
// equal) without sorting the header: the lane checked what Request.Write
// would check or mend (Host valid and without zone, header names and
// values valid, no body).
func writeRequest(req *http.Request, fwd []byte, w io.Writer) error {
	bw := w.(*bufio.Writer)
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(req.Host)
	bw.WriteString("\r\n")
	// Request.Write sends no User-Agent for an empty one (forward sets it
	// empty when the client sent none).
	if ua := req.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		writeField(bw, "User-Agent", ua[0])
	}
	for k, vv := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // Request.Write's own, or none for a request without a body
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	bw.Write(fwd)
	_, err := bw.WriteString("\r\n")
	return err
}

func writeField(bw *bufio.Writer, k, v string) {
	v = fieldValue(v)
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// fieldValue is a header value as net/http's Header.Write writes it: line
// breaks as spaces, no blanks at either end (a folded line of blanks
// leaves one). Most values need neither, and are not copied.
func fieldValue(v string) string {
	if v == "" {
		return v
	}
	if strings.ContainsAny(v, "\r\n") {
		v = newlineToSpace.Replace(v)
	}
	if blank(v[0]) || blank(v[len(v)-1]) {
		v = textproto.TrimString(v)
	}
	return v
}

var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

func blank(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// writeHeader writes the status line and header, with a Date when the
// backend sent none, as net/http's server does.
func (ln *lane) writeHeader(code int, header http.Header, closing bool) {
	ln.writeStatusLine(code)
	for k, vv := range header {
		for _, v := range vv {
			writeField(ln.bw, k, v)
		}
	}
	_, date := header["Date"]
	ln.endHead(date, code, closing)
}

func (ln *lane) writeStatusLine(code int) {
	ln.bw.WriteString("HTTP/1.1 ")
	ln.bw.Write(strconv.AppendInt(ln.date[:0], int64(code), 10))
	ln.bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		ln.bw.WriteString(text)
	} else {
		ln.bw.WriteString("status code " + strconv.Itoa(code))
	}
	ln.bw.WriteString("\r\n")
}

// endHead ends a head of status code whose fields are written: a Date
// unless it has one, Connection: close when closing, the empty line.
func (ln *lane) endHead(date bool, code int, closing bool) {
	if !date && code >= 200 {
		ln.date = time.Now().UTC().AppendFormat(ln.date[:0], http.TimeFormat)
		ln.bw.WriteString("Date: ")
		ln.bw.Write(ln.date)
		ln.bw.WriteString("\r\n")
	}
	if closing {
		ln.bw.WriteString("Connection: close\r\n")
	}
	ln.bw.WriteString("\r\n")
}

// write1xx passes a backend's informational answer on to the client.
func (ln *lane) write1xx(code int, header textproto.MIMEHeader) error {
	ln.writeHeader(code, http.Header(header), false)
	return ln.bw.Flush()
}

// handOver gives the connection to the net/http server with what the lane
// read of it and did not serve, its buffer, first.
func (ln *lane) handOver(handOver func(net.Conn)) {
	ln.setReadDeadline(time.Time{})
	ln.p.handedOver.Add(1)
	handOver(&handedConn{Conn: ln.conn, r: ln.br, tls: ln.tls})
}

// handedConn is a client connection a lane handed over: reads give the
// bytes it read and did not serve first.
type handedConn struct {
	net.Conn
	r   io.Reader
	tls *tls.ConnectionState
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handedTLSKey carries a handed-over TLS connection's state to its
// requests: net/http sets Request.TLS only for a *tls.Conn.
type handedTLSKey struct{}

// connContext is the net/http server's ConnContext.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if hc, ok := c.(*handedConn); ok && hc.tls != nil {
		return context.WithValue(ctx, handedTLSKey{}, hc.tls)
	}
	return ctx
}

// hopHeaders are the hop-by-hop headers ReverseProxy removes (RFC 9110
// 7.6.1), with those the Connection header names.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

// bodyAllowed is false for the statuses that have no body (RFC 9110 6.4.1).
func bodyAllowed(code int) bool {
	return !(code >= 100 && code < 200 || code == http.StatusNoContent || code == http.StatusNotModified)
}

// laneSet tracks the lanes of a Serve, for its shutdown: idle lanes are
// closed at once, busy ones after their answer.
type laneSet struct {
	mu      sync.Mutex
	lanes   map[*lane]struct{}
	closing atomic.Bool
	wg      sync.WaitGroup
}

func (s *laneSet) add(ln *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if s.lanes == nil {
		s.lanes = map[*lane]struct{}{}
	}
	s.lanes[ln] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *laneSet) remove(ln *lane) {
	s.mu.Lock()
	delete(s.lanes, ln)
	s.mu.Unlock()
	s.wg.Done()
}

// shutdown closes the idle lanes; the others close after their answer.
func (s *laneSet) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.Store(true)
	for ln := range s.lanes {
		if ln.state.CompareAndSwap(laneIdle, laneClosed) {
			ln.conn.Close()
		}
	}
}

// wait waits for the lanes to end; at deadline it calls abort (which
// ends the lanes' contexts, and so their backend round trips) and closes
// what is left.
func (s *laneSet) wait(deadline <-chan struct{}, abort func()) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-deadline:
	}
	abort()
	s.mu.Lock()
	for ln := range s.lanes {
		ln.conn.Close()
	}
	s.mu.Unlock()
	<-done
}
