package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A unary call's code is counted by service and method, and timed.
func TestUnaryCountsByCode(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g, err := NewGRPC(reg)
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/legion.v1.Objects/Apply"}
	for _, err := range []error{nil, nil, status.Error(codes.PermissionDenied, "no")} {
		g.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, err })
	}
	if v := counter(t, g.handled.WithLabelValues("legion.v1.Objects", "Apply", "OK")); v != 2 {
		t.Errorf("OK calls = %v, want 2", v)
	}
	if v := counter(t, g.handled.WithLabelValues("legion.v1.Objects", "Apply", "PermissionDenied")); v != 1 {
		t.Errorf("PermissionDenied calls = %v, want 1", v)
	}
	var m = &dtoMetric{}
	if got := m.count(t, g.latency.WithLabelValues("legion.v1.Objects", "Apply")); got != 3 {
		t.Errorf("%d calls timed, want 3", got)
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent int
}

func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SendMsg(any) error            { f.sent++; return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }

// A stream is timed once, at its first message; one whose caller left is
// counted Canceled even when its handler returns quietly.
func TestStreamTimedAtFirstMessageAndCanceled(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g, err := NewGRPC(reg)
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.StreamServerInfo{FullMethod: "/legion.v1.Objects/Watch"}
	ctx, cancel := context.WithCancel(context.Background())
	ss := &fakeStream{ctx: ctx}
	err = g.Stream(nil, ss, info, func(_ any, s grpc.ServerStream) error {
		for range 3 {
			s.SendMsg(nil)
		}
		cancel() // the caller goes away
		return nil
	})
	if err != nil {
		t.Fatalf("the handler's nil came back as %v", err)
	}
	if ss.sent != 3 {
		t.Fatalf("%d messages passed through, want 3", ss.sent)
	}
	if v := counter(t, g.handled.WithLabelValues("legion.v1.Objects", "Watch", "Canceled")); v != 1 {
		t.Errorf("Canceled streams = %v, want 1", v)
	}
	var m = &dtoMetric{}
	if got := m.count(t, g.latency.WithLabelValues("legion.v1.Objects", "Watch")); got != 1 {
		t.Errorf("the stream was timed %d times, want once", got)
	}
}

// A stream to a method the server lacks is counted under "unknown" and
// refused as gRPC refuses it, without reaching the rest of the chain.
func TestUnknownMethodsCountedUnderUnknown(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g, err := NewGRPC(reg)
	if err != nil {
		t.Fatal(err)
	}
	g.Known = func(m string) bool {
		return Methods(map[string]grpc.ServiceInfo{"legion.v1.Objects": {Methods: []grpc.MethodInfo{{Name: "Apply"}}}})[m]
	}
	reached := false
	err = g.Stream(nil, &fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/made.Up/Name"},
		func(any, grpc.ServerStream) error { reached = true; return nil })
	if status.Code(err) != codes.Unimplemented || reached {
		t.Fatalf("an unknown method: %v, handler reached %v; want Unimplemented and not reached", err, reached)
	}
	if v := counter(t, g.handled.WithLabelValues("unknown", "unknown", "Unimplemented")); v != 1 {
		t.Errorf("unknown calls = %v, want 1", v)
	}
	if g.Known("/legion.v1.Objects/Apply") != true {
		t.Error("a registered method is not known")
	}
}
