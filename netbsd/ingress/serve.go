package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pires/go-proxyproto"
)

// Serve serves plain HTTP on l, HTTP/1.1 and HTTP/2 by its preface (h2c),
// until ctx ends; then it stops taking connections, lets requests in flight
// finish for GracePeriod, closes what is left (upgraded connections too) and
// returns nil. It returns early only if l fails.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return p.serve(ctx, l, &protocols, false)
}

// ServeTLS is Serve over TLS with TLSConfig: HTTP/2 or HTTP/1.1 by ALPN, and
// X-Forwarded-Proto https to the backends.
func (p *Proxy) ServeTLS(ctx context.Context, l net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	return p.serve(ctx, l, &protocols, true)
}

// The client side's timings: how long a connection may wait for its next
// request, and how long a TLS handshake or a request's head may take.
const (
	clientIdleTimeout   = 2 * time.Minute
	clientHeaderTimeout = 30 * time.Second
)

// serve accepts on l itself: each connection is served by a lane
// (http1.go) until it asks for what only net/http's server does, which
// then gets the connection through a listener of handed-over connections.
// HTTP/2 over TLS (by ALPN) goes to net/http at once, and cleartext
// HTTP/2 with its first request (its preface is not a request a lane
// takes).
func (p *Proxy) serve(ctx context.Context, l net.Listener, protocols *http.Protocols, useTLS bool) error {
	p.init()
	if len(p.AcceptProxyProtocol) > 0 {
		trusted := make([]string, len(p.AcceptProxyProtocol))
		for i, c := range p.AcceptProxyProtocol {
			trusted[i] = c.String()
		}
		policy, err := proxyproto.PolicyFromRanges(trusted, proxyproto.REQUIRE, proxyproto.REJECT)
		if err != nil {
			return err
		}
		l = &proxyproto.Listener{Listener: l, ConnPolicy: policy}
	}
	// Requests live on a context of their own, not ctx, so that ending ctx
	// lets them finish; cancelling it at the end closes upgraded
	// connections, which Shutdown does not track, and ends the lanes'
	// backend round trips.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var handlers handlerSet
	handed := newHandedListener(l.Addr())
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !handlers.enter() {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			defer handlers.wg.Done()
			if r.TLS == nil {
				r.TLS, _ = r.Context().Value(handedTLSKey{}).(*tls.ConnectionState)
			}
			p.ServeHTTP(w, r)
		}),
		Protocols:         protocols,
		ReadHeaderTimeout: clientHeaderTimeout,
		IdleTimeout:       clientIdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       connContext,
		// Handshake failures (unknown SNI, scanners) are routine for an
		// edge proxy: debug, not warnings.
		ErrorLog: slog.NewLogLogger(p.Logger.Handler(), slog.LevelDebug),
	}
	var tlsConfig *tls.Config
	if useTLS {
		// For HTTP/2 over the connections handed over after their
		// handshake (Serve configures it from TLSConfig's NextProtos).
		tlsConfig = p.TLSConfig()
		srv.TLSConfig = tlsConfig
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(handed) }()
	var lanes laneSet
	accepted := make(chan error, 1)
	go func() { accepted <- p.accept(ctx, base, l, tlsConfig, &lanes, handed.put) }()
	var err error
	graceFor := p.GracePeriod
	select {
	case err = <-accepted:
		graceFor = 0 // the listener failed before ctx ended: close everything now
	case <-ctx.Done():
		l.Close()
		<-accepted
	}
	l.Close()
	grace, cancelGrace := context.WithTimeout(context.Background(), graceFor)
	defer cancelGrace()
	lanes.shutdown()
	if shutErr := srv.Shutdown(grace); shutErr != nil && err == nil {
		p.Logger.Warn("ingress: requests still running after the grace period, closing them", "err", shutErr)
	}
	lanes.wait(grace.Done(), cancelBase)
	<-served
	cancelBase()
	srv.Close()
	handlers.closeAndWait()
	p.backend.CloseIdleConnections()
	return err
}

// accept serves each connection l accepts on a goroutine of its own,
// until ctx ends (nil) or l fails (its error).
func (p *Proxy) accept(ctx, base context.Context, l net.Listener, tlsConfig *tls.Config, lanes *laneSet, handOver func(net.Conn)) error {
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Out of descriptors and the like: wait and try again, as
			// net/http's server does.
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // what net/http checks
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				p.Logger.Warn("ingress: accept failed, trying again", "err", err, "in", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil
				}
				continue
			}
			return err
		}
		delay = 0
		go p.serveLane(base, c, tlsConfig, lanes, handOver)
	}
}

// handedListener is what the net/http server accepts from: the
// connections lanes hand over.
type handedListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newHandedListener(addr net.Addr) *handedListener {
	return &handedListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *handedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *handedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handedListener) Addr() net.Addr { return l.addr }

// put gives c to the server, or closes it once the server takes no more.
func (l *handedListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

// handlerSet counts the handlers running, so Serve returns only once the
// last (an upgraded connection's, say) has; none starts after closing.
type handlerSet struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (h *handlerSet) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

func (h *handlerSet) closeAndWait() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}
