package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	clustermetrics "github.com/legionbsd/legion/cluster/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsShutdown bounds how long a closing metrics listener waits for a
// scrape in progress.
const metricsShutdown = 5 * time.Second

// MetricsServer serves a daemon's registry at /metrics over plain HTTP
// (3.8: no authentication, so it belongs on an admin network).
type MetricsServer struct {
	// Registry is where the manager and the agent register their
	// families; only what is registered here is served.
	Registry *prometheus.Registry
	// Addr is where it listens.
	Addr string
	srv  *http.Server
	done chan struct{}
}

// ServeMetrics listens on addr and serves /metrics from a registry of its
// own (never Prometheus's global one), holding the process's families
// already.
func ServeMetrics(addr string, log *slog.Logger) (*MetricsServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	if err := clustermetrics.RegisterProcess(reg); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	m := &MetricsServer{Registry: reg, Addr: lis.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "addr", m.Addr, "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+m.Addr+"/metrics")
	return m, nil
}

// Close stops listening and waits for the scrapes in progress (a few
// seconds at most).
func (m *MetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if err != nil {
		m.srv.Close()
	}
	<-m.done
	return err
}
