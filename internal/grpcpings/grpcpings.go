// Package grpcpings counts the HTTP/2 PING frames a gRPC server's peers
// send it, for tests of the clients' flow control: gRPC's default
// bandwidth estimate pings the server at nearly every answer of a call
// (see legionpb.FixedWindows), which a client that keeps its windows
// fixed never does.
package grpcpings

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Counter counts the PING frames (not their acknowledgements) sent to
// servers whose credentials it wrapped.
type Counter struct{ pings atomic.Int64 }

// Pings is how many PING frames the servers were sent.
func (c *Counter) Pings() int64 { return c.pings.Load() }

// ServeHealth serves gRPC's health service on a loopback port, with
// creds and the pings counted, until the test ends: each Check is
// answered with data, as most of a manager's calls are.
func ServeHealth(t testing.TB, creds credentials.TransportCredentials) (addr string, count *Counter) {
	t.Helper()
	count = new(Counter)
	g := grpc.NewServer(grpc.Creds(count.Creds(creds)))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	t.Cleanup(func() { g.Stop(); <-served })
	go func() { served <- g.Serve(lis) }()
	return lis.Addr().String(), count
}

// Creds wraps a server's credentials: the connections they make are
// read through the counter, after TLS, where the frames are plain.
func (c *Counter) Creds(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &creds{TransportCredentials: inner, c: c}
}

type creds struct {
	credentials.TransportCredentials
	c *Counter
}

func (w *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := w.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return &conn{Conn: c, c: w.c}, info, nil
}

func (w *creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return w.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

func (w *creds) Clone() credentials.TransportCredentials {
	return &creds{TransportCredentials: w.TransportCredentials.Clone(), c: w.c}
}

// HTTP/2 as a client opens it (RFC 9113, sections 3.4 and 4.1).
const (
	prefaceLen = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	headerLen  = 9  // length (3 bytes), type, flags, stream
	framePing  = 0x6
	flagAck    = 0x1
)

// conn reads a client's side of a connection frame by frame as it goes.
type conn struct {
	net.Conn
	c *Counter

	preface int // preface bytes read
	hdr     [headerLen]byte
	hdrN    int // bytes of the next frame's header read
	skip    int // payload bytes of the current frame left to read
}

func (r *conn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.feed(b[:n])
	return n, err
}

func (r *conn) feed(b []byte) {
	for len(b) > 0 {
		var n int
		switch {
		case r.preface < prefaceLen:
			n = min(prefaceLen-r.preface, len(b))
			r.preface += n
		case r.skip > 0:
			n = min(r.skip, len(b))
			r.skip -= n
		default:
			n = copy(r.hdr[r.hdrN:], b)
			r.hdrN += n
			if r.hdrN == headerLen {
				r.hdrN = 0
				r.skip = int(r.hdr[0])<<16 | int(r.hdr[1])<<8 | int(r.hdr[2])
				if r.hdr[3] == framePing && r.hdr[4]&flagAck == 0 {
					r.c.pings.Add(1)
				}
			}
		}
		b = b[n:]
	}
}
