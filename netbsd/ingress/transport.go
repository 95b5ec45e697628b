package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"
)

// backendTransport makes the round trips of requests without a body to a
// backend on the goroutine that asks, over a kept-alive HTTP/1.1
// connection: it writes the request (Request.Write), reads the response
// (http.ReadResponse) and hands the connection back once the body is read
// to its end. http.Transport gives each connection a reading and a writing
// goroutine and passes each request and response between them and the
// handler, three goroutine switches a request; on a loaded proxy those
// and the wake-ups of threads they cause cost as much CPU as the request's
// own work.
//
// The rest goes to the fallback (http.Transport): requests with a body
// (it writes the body while it reads an early response, and handles
// Expect: 100-continue), protocol upgrades (WebSocket: the connection
// becomes the client's), and requests not safe to send twice, since a kept
// connection the backend has just closed is noticed only by using it: an
// idempotent request is then sent again on a new connection, as
// http.Transport does.
type backendTransport struct {
	dial          func(ctx context.Context, network, addr string) (net.Conn, error)
	fallback      http.RoundTripper
	headerTimeout time.Duration // from the request written to the response's headers
	idleTimeout   time.Duration // how long a connection waits for its next request
	maxIdle       int           // kept connections per backend
	maxIdleTotal  int           // kept connections in all

	mu        sync.Mutex
	idle      map[string][]*backendConn // by backend address, most recent last
	idleTotal int
	sweeper   *time.Timer // closes what waited idleTimeout, while any wait
}

// backendConn is a kept connection to a backend with its buffers.
type backendConn struct {
	t         *backendTransport
	addr      string
	conn      net.Conn
	lr        limitedReader // ask, limited while headers are read
	br        *bufio.Reader // reads lr
	bw        *bufio.Writer // writes ask
	idleSince time.Time
}

// maxResponseHeaderBytes bounds what is read from a backend before its
// answer's headers end, http.Transport's default: a backend sending
// headers without end would otherwise fill the proxy's memory.
const maxResponseHeaderBytes = 10 << 20

var errResponseHeaderTooLarge = errors.New("backend answer's headers exceed 10 MiB")

// limitedReader reads r, at most n bytes more when n >= 0.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errResponseHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// backendBufferSize is the size of the read and write buffers of a
// backend connection, http.Transport's: a request's headers fit in one
// write, a response's headers and a small body in one read (a larger body
// is read straight into the copy buffer).
const backendBufferSize = 4 << 10

// errBackendConnBroken stands for a kept connection that failed before
// any byte of a response came (closed by the backend while idle).
var errBackendConnBroken = errors.New("kept backend connection broken")

func (t *backendTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || (req.Body != nil && req.Body != http.NoBody) || !replayable(req.Method) || req.Header.Get("Upgrade") != "" || req.Close {
		return t.fallback.RoundTrip(req)
	}
	return t.keptRoundTrip(req.Context(), req, (*http.Request).Write)
}

// keptRoundTrip is RoundTrip of a request it takes (bodiless, replayable,
// no upgrade) under ctx, which stands for req's context; write writes req
// (Request.Write, or a lane's writeRequest).
func (t *backendTransport) keptRoundTrip(ctx context.Context, req *http.Request, write func(*http.Request, io.Writer) error) (*http.Response, error) {
	c, stop, err := t.keptAsk(ctx, req, write, nil)
	if err != nil {
		return nil, err
	}
	return c.readResponse(ctx, req, stop)
}

// keptAsk sends req (as keptRoundTrip takes it) on a kept connection, or a
// new one, and waits for the first byte of its answer. stop ends the
// watch of ctx that closes c; the answer is to be read with
// c.readResponse, or as a lane reads it. watch, when not nil, is how c
// is watched (see ask).
func (t *backendTransport) keptAsk(ctx context.Context, req *http.Request, write func(*http.Request, io.Writer) error,
	watch func(*backendConn) func() bool) (*backendConn, func() bool, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx, req.URL.Host)
		if err != nil {
			return nil, nil, err
		}
		stop, err := c.ask(ctx, req, write, watch)
		if err == nil {
			return c, stop, nil
		}
		if !reused || attempt > 0 || !errors.Is(err, errBackendConnBroken) || ctx.Err() != nil {
			return nil, nil, err
		}
		// The backend closed the kept connection before it read the
		// request: send it on a new one.
	}
}

// replayable methods may be sent again when a kept connection turns out
// closed (RFC 9110 9.2.2, as http.Transport decides).
func replayable(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// get is a kept connection to addr, the most recently used, or a new one.
func (t *backendTransport) get(ctx context.Context, addr string) (c *backendConn, reused bool, err error) {
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[addr]; len(list) > 0; list = t.idle[addr] {
		c = list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		t.idleTotal--
		if len(list) == 1 {
			delete(t.idle, addr)
		}
		// Bytes already read past the last answer are an answer nobody
		// asked for: such a connection would give the next request another
		// one's answer (http.Transport closes it too).
		if now.Sub(c.idleSince) < t.idleTimeout && c.br.Buffered() == 0 {
			t.mu.Unlock()
			return c, true, nil
		}
		c.conn.Close()
	}
	t.mu.Unlock()
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	ask := newAskingConn(conn)
	c = &backendConn{t: t, addr: addr, conn: conn, lr: limitedReader{r: ask, n: -1}}
	c.br = bufio.NewReaderSize(&c.lr, backendBufferSize)
	c.bw = bufio.NewWriterSize(ask, backendBufferSize)
	return c, false, nil
}

// put keeps c for the next request to its backend, or closes it when
// maxIdle of its backend, or maxIdleTotal in all, already wait.
func (t *backendTransport) put(c *backendConn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[string][]*backendConn{}
	}
	if len(t.idle[c.addr]) >= t.maxIdle || t.idleTotal >= t.maxIdleTotal {
		c.conn.Close()
		return
	}
	t.idle[c.addr] = append(t.idle[c.addr], c)
	t.idleTotal++
	if t.sweeper == nil {
		t.sweeper = time.AfterFunc(t.idleTimeout, t.sweep)
	}
}

// sweep closes the connections idle for idleTimeout, so that those of a
// backend no longer asked for (gone from the routes) do not stay open.
func (t *backendTransport) sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweeper = nil
	now := time.Now()
	for addr, list := range t.idle {
		kept := list[:0]
		for _, c := range list {
			if now.Sub(c.idleSince) < t.idleTimeout {
				kept = append(kept, c)
			} else {
				c.conn.Close()
				t.idleTotal--
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
	}
	if len(t.idle) > 0 {
		t.sweeper = time.AfterFunc(t.idleTimeout, t.sweep)
	}
}

// CloseIdleConnections closes the kept connections, the fallback's too.
func (t *backendTransport) CloseIdleConnections() {
	t.mu.Lock()
	for _, list := range t.idle {
		for _, c := range list {
			c.conn.Close()
		}
	}
	t.idle, t.idleTotal = nil, 0
	if t.sweeper != nil {
		t.sweeper.Stop()
		t.sweeper = nil
	}
	t.mu.Unlock()
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// alreadyPast is a deadline that makes a blocked read or write on a
// connection return at once.
var alreadyPast = time.Unix(1, 0)

// ask sends req on c and waits, within the header timeout, for the first
// byte of the answer. Ending ctx (req's) closes c whatever it is doing,
// until stop is called, which says whether ctx ended meanwhile: by
// moving c's deadline to the past, from context.AfterFunc, or as watch
// arranges when it is not nil (a lane has one such function for all its
// requests).
func (c *backendConn) ask(ctx context.Context, req *http.Request, write func(*http.Request, io.Writer) error,
	watch func(*backendConn) func() bool) (stop func() bool, err error) {
	if watch != nil {
		stop = watch(c)
	} else {
		stop = context.AfterFunc(ctx, func() { c.conn.SetDeadline(alreadyPast) })
	}
	if err := write(req, c.bw); err != nil {
		return nil, c.fail(ctx, stop, err)
	}
	// On a TCP connection the request is sent by the first read of its
	// answer (askingConn), whose errors say whether it could be sent.
	if err := c.bw.Flush(); err != nil {
		return nil, c.fail(ctx, stop, fmt.Errorf("%w: %w", errBackendConnBroken, err))
	}
	// Each change of the deadline is followed by a look at ctx: had it
	// ended just before, the change would undo the one stop makes.
	if err := c.conn.SetReadDeadline(time.Now().Add(c.t.headerTimeout)); err != nil || ctx.Err() != nil {
		return nil, c.fail(ctx, stop, err)
	}
	c.lr.n = maxResponseHeaderBytes
	// A kept connection the backend closed while it was idle fails here,
	// before any byte of an answer: the caller may then send the request
	// again.
	if _, err := c.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) || isReset(err) {
			err = fmt.Errorf("%w: %w", errBackendConnBroken, err)
		}
		return nil, c.fail(ctx, stop, err)
	}
	return stop, nil
}

// fail closes c after a failed exchange and says why: ctx's end, when it
// ended, else err.
func (c *backendConn) fail(ctx context.Context, stop func() bool, err error) error {
	stop()
	c.conn.Close()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// readResponse reads the headers of the answer ask waited for; the body is
// read from c as the caller reads it, and c goes back to the transport at
// its end.
func (c *backendConn) readResponse(ctx context.Context, req *http.Request, stop func() bool) (*http.Response, error) {
	fail := func(err error) (*http.Response, error) { return nil, c.fail(ctx, stop, err) }
	var resp *http.Response
	for {
		var err error
		if resp, err = http.ReadResponse(c.br, req); err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			// An informational answer (103 Early Hints) before the real
			// one: passed on as http.Transport does.
			if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
					return fail(err)
				}
			}
			continue
		}
		break
	}
	c.lr.n = -1
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Upgrades were not asked for on this path.
		return fail(errors.New("backend switched protocols unasked"))
	}
	if err := c.conn.SetReadDeadline(time.Time{}); err != nil || ctx.Err() != nil {
		return fail(err)
	}
	if resp.Body == http.NoBody {
		// No body (HEAD, 204, 304, a length of 0): done with c already.
		(&backendBody{c: c, stop: stop, keep: !resp.Close}).finish(true)
		return resp, nil
	}
	resp.Body = &backendBody{c: c, body: resp.Body, stop: stop, keep: !resp.Close}
	return resp, nil
}

// isReset is a connection reset or a broken pipe: what a write or read on
// a connection the backend closed gives.
func isReset(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && !opErr.Timeout()
}

// backendBody is a response body read from a kept connection: at its end
// the connection goes back to the transport; closed before its end, the
// connection is closed (the rest of the body is not read for nothing).
type backendBody struct {
	c    *backendConn
	body io.ReadCloser
	stop func() bool
	keep bool // the backend lets the connection carry another request
	done bool
}

func (b *backendBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

func (b *backendBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish gives the connection back (whole is true when the body was read
// to its end) or closes it.
func (b *backendBody) finish(whole bool) {
	b.done = true
	b.c.release(b.stop, whole && b.keep)
}

// release ends an exchange on c, stopping its watch of the request's
// context: c goes back to the transport when keep is true (the answer was
// read whole and the backend keeps the connection) and the context did
// not end meanwhile; else it is closed.
func (c *backendConn) release(stop func() bool, keep bool) {
	if stop() && keep {
		c.t.put(c)
		return
	}
	c.conn.Close()
}

// bufferedHead reads until the answer's head (through its empty line) is
// in c's buffer and returns it; nil when it does not fit there.
func (c *backendConn) bufferedHead() ([]byte, error) {
	head, err := bufferedHead(c.br, func() {})
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the answer cut short
	}
	return head, err
}
