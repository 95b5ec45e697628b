package metrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// GRPC counts the calls a manager answers, by service, method and the
// code they ended with, and times each until its answer starts.
type GRPC struct {
	handled *prometheus.CounterVec
	latency *prometheus.HistogramVec
	// Known, when set, says whether the server has a method; a stream
	// to one it lacks (the server's unknown-service handler) is counted
	// under service and method "unknown" and refused without going on
	// down the chain, so any caller's made-up names add no series.
	Known func(fullMethod string) bool
}

// NewGRPC registers the gRPC families on reg.
func NewGRPC(reg prometheus.Registerer) (*GRPC, error) {
	g := &GRPC{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legion_grpc_server_handled_total",
			Help: "gRPC calls this manager answered, by service, method and the status code they ended with.",
		}, []string{"service", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "legion_grpc_server_handling_seconds",
			Help: "Time from a gRPC call's arrival until its answer started (a stream's first message, or its end when it sent none).",
			// From a local read (well under a millisecond) to a write
			// waiting out an election (seconds).
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"service", "method"}),
	}
	for _, c := range []prometheus.Collector{g.handled, g.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// splitMethod turns "/legion.Objects/Apply" into its service and method.
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	service, method, ok := strings.Cut(full, "/")
	if !ok {
		return "unknown", "unknown"
	}
	return service, method
}

// code is the status a call ended with; a caller that went away (a
// dropped stream) is Canceled rather than Unknown.
func code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return status.Code(err)
}

func (g *GRPC) done(service, method string, err error) {
	g.handled.WithLabelValues(service, method, code(err).String()).Inc()
}

// Unary counts and times unary calls; it goes first in the chain so
// refusals by the interceptors after it are counted too.
func (g *GRPC) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	service, method := splitMethod(info.FullMethod)
	start := time.Now()
	resp, err := handler(ctx, req)
	g.latency.WithLabelValues(service, method).Observe(time.Since(start).Seconds())
	g.done(service, method, err)
	return resp, err
}

// Stream counts streams and times each until its first message out.
func (g *GRPC) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if g.Known != nil && !g.Known(info.FullMethod) {
		err := unimplemented(info.FullMethod)
		g.latency.WithLabelValues("unknown", "unknown").Observe(0)
		g.done("unknown", "unknown", err)
		return err
	}
	service, method := splitMethod(info.FullMethod)
	w := &timedStream{ServerStream: ss, start: time.Now(), observe: g.latency.WithLabelValues(service, method)}
	err := handler(srv, w)
	w.first()
	counted := err
	if err == nil && ss.Context().Err() != nil {
		// The handler saw its caller leave and returned quietly.
		counted = ss.Context().Err()
	}
	g.done(service, method, counted)
	return err
}

// timedStream observes the time to the stream's first answer once.
type timedStream struct {
	grpc.ServerStream
	start   time.Time
	observe prometheus.Observer
	once    sync.Once // a handler may send from several goroutines
}

func (t *timedStream) first() {
	t.once.Do(func() { t.observe.Observe(time.Since(t.start).Seconds()) })
}

func (t *timedStream) SendHeader(md metadata.MD) error {
	t.first()
	return t.ServerStream.SendHeader(md)
}

func (t *timedStream) SendMsg(m any) error {
	t.first()
	return t.ServerStream.SendMsg(m)
}

// Methods lists a server's methods by full name, for GRPC.Known.
func Methods(services map[string]grpc.ServiceInfo) map[string]bool {
	out := map[string]bool{}
	for name, svc := range services {
		for _, m := range svc.Methods {
			out["/"+name+"/"+m.Name] = true
		}
	}
	return out
}

// Unimplemented is a server's unknown-service handler: it refuses the call
// as gRPC does without one.
func Unimplemented(_ any, ss grpc.ServerStream) error {
	m, _ := grpc.MethodFromServerStream(ss)
	return unimplemented(m)
}

// unimplemented is gRPC's own refusal of a method the server lacks.
func unimplemented(fullMethod string) error {
	service, method := splitMethod(fullMethod)
	if service == "unknown" {
		return status.Errorf(codes.Unimplemented, "malformed method name: %q", fullMethod)
	}
	return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", method, service)
}
