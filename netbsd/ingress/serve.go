package ingress

import (
	"context"
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
	// connections, which Shutdown does not track.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var handlers handlerSet
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !handlers.enter() {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			defer handlers.wg.Done()
			p.ServeHTTP(w, r)
		}),
		Protocols:         protocols,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		// Handshake failures (unknown SNI, scanners) are routine for an
		// edge proxy: debug, not warnings.
		ErrorLog: slog.NewLogLogger(p.Logger.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() {
		if useTLS {
			srv.TLSConfig = p.TLSConfig()
			served <- srv.ServeTLS(l, "", "")
		} else {
			served <- srv.Serve(l)
		}
	}()
	var err error
	select {
	case err = <-served:
		// The listener failed before ctx ended.
	case <-ctx.Done():
		grace, cancel := context.WithTimeout(context.Background(), p.GracePeriod)
		if shutErr := srv.Shutdown(grace); shutErr != nil {
			p.Logger.Warn("ingress: requests still running after the grace period, closing them", "err", shutErr)
		}
		cancel()
		err = <-served
	}
	cancelBase()
	srv.Close()
	handlers.closeAndWait()
	p.backend.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
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
