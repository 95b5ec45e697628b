package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/netbsd/ingress"
)

// Ingress is the node's HTTP proxy (5.8), fed the routes and their
// certificates as the assignments arrive.
type Ingress struct {
	Proxy  *ingress.Proxy
	Logger *slog.Logger

	mu    sync.Mutex
	certs map[string]*tls.Certificate // namespace/secret -> last good
	seen  map[string]string           // namespace/secret -> the PEM parsed last
}

// NewIngress makes a proxy with no routes.
func NewIngress(log *slog.Logger) *Ingress {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ingress{Proxy: &ingress.Proxy{Logger: log}, Logger: log,
		certs: map[string]*tls.Certificate{}, seen: map[string]string{}}
}

// Apply serves the routes. A route's certificate is read from the values
// when it changed; one that does not parse keeps the last good one.
func (g *Ingress) Apply(_ context.Context, routes []endpoints.Route, values map[string][]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]ingress.Route, 0, len(routes))
	want := map[string]bool{}
	for _, r := range routes {
		ir := ingress.Route{Namespace: r.Namespace, Name: r.Name, Host: r.Host, Path: r.Path,
			Backends: r.Backends, TLSSecret: r.TLSSecret, Challenges: r.Challenges,
			ProxyProtocol: r.ProxyProtocol, RedirectHTTPS: r.RedirectHTTPS}
		for _, c := range r.TrustedProxies {
			// Admission normalised them; one that does not parse is left
			// out (trusting less), and said.
			if p, err := netip.ParsePrefix(c); err == nil {
				ir.TrustedProxies = append(ir.TrustedProxies, p)
			} else {
				g.Logger.Warn("ingress: a trusted proxy that is no CIDR is not trusted", "route", r.Namespace+"/"+r.Name, "trustedProxy", c)
			}
		}
		out = append(out, ir)
		if r.TLSSecret == "" {
			continue
		}
		key := r.Namespace + "/" + r.TLSSecret
		want[key] = true
		data, ok := values[legion.Key(legion.KindSecret, r.Namespace, r.TLSSecret)]
		if !ok || g.seen[key] == string(data) {
			continue
		}
		g.seen[key] = string(data)
		c, err := ingress.ParseCertificate(data)
		if err != nil {
			g.Logger.Warn("route certificate not taken; the last good one stays", "secret", key, "err", err)
			continue
		}
		g.certs[key] = c
	}
	for key := range g.certs {
		if !want[key] {
			delete(g.certs, key)
			delete(g.seen, key)
		}
	}
	certs := make(map[string]*tls.Certificate, len(g.certs))
	for k, v := range g.certs {
		certs[k] = v
	}
	g.Proxy.SetCertificates(certs)
	g.Proxy.SetRoutes(out)
}

// Serve listens on the plain and TLS addresses given (either may be
// empty) until ctx ends, and says where it listens.
func (g *Ingress) Serve(ctx context.Context, plain, secure string, run func(string, func(context.Context) error)) ([]string, error) {
	var addrs []string
	for _, l := range []struct {
		addr string
		tls  bool
	}{{plain, false}, {secure, true}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return addrs, fmt.Errorf("ingress: %w", err)
		}
		addrs = append(addrs, ln.Addr().String())
		if l.tls {
			run("ingress (TLS)", func(ctx context.Context) error { return g.Proxy.ServeTLS(ctx, ln) })
		} else {
			run("ingress", func(ctx context.Context) error { return g.Proxy.Serve(ctx, ln) })
		}
	}
	return addrs, nil
}
