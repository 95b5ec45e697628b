package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the Proxy's fields left zero.
const (
	DefaultHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout   = time.Minute
	DefaultGracePeriod   = 10 * time.Second
)

// acmePrefix is where ACME HTTP-01 challenges are asked for.
const acmePrefix = "/.well-known/acme-challenge/"

// Proxy serves HTTP routes. Its fields are read on first use (the first
// SetRoutes, ServeHTTP or Serve); change them before that. The zero value
// serves no route (404 for everything) until SetRoutes.
type Proxy struct {
	Logger *slog.Logger
	// HeaderTimeout is how long a backend may take to send its response
	// headers before the client gets 504 (DefaultHeaderTimeout when zero).
	// It bounds the dial to a backend too, which then gives 502.
	HeaderTimeout time.Duration
	// IdleTimeout is how long a connection to a backend is kept for the
	// next request (DefaultIdleTimeout when zero).
	IdleTimeout time.Duration
	// GracePeriod is how long Serve lets requests in flight finish once its
	// context ends, before closing them (DefaultGracePeriod when zero).
	GracePeriod time.Duration
	// AcceptProxyProtocol are the load balancers in front (CIDRs) that open
	// each connection with a PROXY protocol header: from them one is
	// required and its client address used; from anyone else one is
	// refused. Empty: no PROXY protocol is read.
	AcceptProxyProtocol []netip.Prefix

	once      sync.Once
	buffers   *bufferPool
	dialer    *net.Dialer
	transport *http.Transport // for what backend does not take
	backend   *backendTransport
	mu        sync.Mutex // orders SetRoutes, which reads the previous table
	routes    atomic.Pointer[table]
	certs     atomic.Pointer[map[string]*tls.Certificate]
	conflicts string // the certificate conflicts last logged, under mu
	// handedOver counts the connections lanes gave to net/http's server.
	handedOver atomic.Int64
}

func (p *Proxy) init() {
	p.once.Do(func() {
		if p.Logger == nil {
			p.Logger = slog.New(slog.DiscardHandler)
		}
		if p.HeaderTimeout <= 0 {
			p.HeaderTimeout = DefaultHeaderTimeout
		}
		if p.IdleTimeout <= 0 {
			p.IdleTimeout = DefaultIdleTimeout
		}
		if p.GracePeriod <= 0 {
			p.GracePeriod = DefaultGracePeriod
		}
		dialer := &net.Dialer{Timeout: p.HeaderTimeout, KeepAlive: 30 * time.Second}
		p.dialer = dialer
		p.buffers = newBufferPool()
		var protocols http.Protocols
		protocols.SetHTTP1(true) // backends get HTTP/1.1 only (5.8)
		p.transport = &http.Transport{
			// No Proxy: backends are pod addresses the node reaches
			// directly, never through the host's HTTP proxy settings.
			DialContext:           dialer.DialContext,
			Protocols:             &protocols,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       p.IdleTimeout,
			ResponseHeaderTimeout: p.HeaderTimeout,
			ExpectContinueTimeout: time.Second,
			// The client's own Accept-Encoding goes to the backend, and
			// the answer back as it is: no gzip asked for and unpacked.
			DisableCompression: true,
		}
		p.backend = &backendTransport{
			dial:          dialer.DialContext,
			fallback:      p.transport,
			headerTimeout: p.HeaderTimeout,
			idleTimeout:   p.IdleTimeout,
			maxIdle:       p.transport.MaxIdleConnsPerHost,
			maxIdleTotal:  p.transport.MaxIdleConns,
		}
		if p.routes.Load() == nil {
			p.routes.Store(&table{})
		}
	})
}

// SetRoutes replaces the route table at once; requests in flight finish on
// the table they started with.
func (p *Proxy) SetRoutes(routes []Route) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	t := buildTable(routes, p.routes.Load(), p.newReverseProxy)
	p.routes.Store(t)
	p.reportConflicts(t)
}

// SetCertificates replaces the certificates, keyed "namespace/secret". Nil
// entries are left out, so a host whose Secret did not parse has no
// certificate (the caller keeps the last good one if it wants it served).
func (p *Proxy) SetCertificates(certs map[string]*tls.Certificate) {
	kept := make(map[string]*tls.Certificate, len(certs))
	for k, c := range certs {
		if c != nil {
			kept[k] = c
		}
	}
	p.certs.Store(&kept)
}

// CloseIdleConnections closes the kept connections to backends. Serve and
// ServeTLS do it when they end.
func (p *Proxy) CloseIdleConnections() {
	p.init()
	p.backend.CloseIdleConnections()
}

// ServeHTTP routes one request: an ACME challenge of the host is answered
// here, anything else goes to the next backend of the matching route.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	t := p.routes.Load()
	host := requestHost(r.Host)
	if token, ok := strings.CutPrefix(r.URL.Path, acmePrefix); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if auth, ok := t.challenge(host, token); ok {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", fmt.Sprint(len(auth)))
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				io.WriteString(w, auth)
			}
			return
		}
	}
	e := t.match(host, r.URL.Path)
	if e == nil {
		http.Error(w, "no route for this host and path", http.StatusNotFound)
		return
	}
	if e.route.RedirectHTTPS && hopOf(r, e.route.TrustedProxies).proto == "http" {
		http.Redirect(w, r, "https://"+r.Host+r.URL.RequestURI(), http.StatusPermanentRedirect)
		return
	}
	if len(e.route.Backends) == 0 {
		http.Error(w, "no ready backend for this route", http.StatusServiceUnavailable)
		return
	}
	// No Content-Type of net/http's guessing when the backend sent none:
	// a proxy passes the answer as it is (and lanes do).
	w.Header()["Content-Type"] = nil
	e.proxy.ServeHTTP(w, r)
}

// newReverseProxy makes the reverse proxy of one route: it picks the next
// backend per request and shares the Proxy's transport.
func (p *Proxy) newReverseProxy(e *entry) *httputil.ReverseProxy {
	log := p.Logger.With("route", e.route.Namespace+"/"+e.route.Name)
	var transport http.RoundTripper = p.backend
	proxyProtocol := e.route.ProxyProtocol != ""
	if proxyProtocol {
		var version byte = 1
		if e.route.ProxyProtocol == "v2" {
			version = 2
		}
		// A connection's PROXY header names one client: never reuse it
		// for another's request.
		pp := p.transport.Clone()
		pp.DisableKeepAlives = true
		pp.DialContext = dialProxyProtocol(p.dialer.DialContext, version)
		transport = pp
	}
	return &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: p.buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = e.backend()
			// The backend sees the Host the client asked for, as a virtual
			// host would, and the client's address and scheme as far as
			// the route trusts the hops in front (Rewrite has dropped the
			// incoming X-Forwarded-* and Forwarded; hopOf reads them).
			pr.Out.Host = pr.In.Host
			h := hopOf(pr.In, e.route.TrustedProxies)
			h.setHeaders(pr.In.Host, pr.Out.Header)
			if proxyProtocol {
				withClientConn(pr, h)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := errorStatus(err)
			level := slog.LevelWarn
			if errors.Is(err, context.Canceled) {
				level = slog.LevelDebug // the client went away
			}
			log.Log(r.Context(), level, "ingress backend failed", "backend", r.URL.Host, "status", status, "err", err)
			w.WriteHeader(status)
		},
		ErrorLog: slog.NewLogLogger(p.Logger.Handler(), slog.LevelWarn),
	}
}

// errorStatus is 504 for a backend that took the connection but sent no
// headers in time, 502 for everything else (refused, unreachable, reset).
func errorStatus(err error) int {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return http.StatusBadGateway
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// TLSConfig chooses the certificate by SNI: an exact host's before a
// wildcard's, among the routes naming a TLS Secret. For a name no such route
// has, or whose certificate is not loaded, GetCertificate returns an error
// saying which, and the handshake fails (the client sees internal_error;
// crypto/tls sends unrecognized_name only for a config with no certificates
// at all, which would hide the reason from callers and logs).
func (p *Proxy) TLSConfig() *tls.Config {
	p.init()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.certificate(hello.ServerName)
		},
	}
}
