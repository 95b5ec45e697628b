package ingress

import (
	"io"
	"net"
	"os"
	"syscall"
)

// askingConn is a backend connection as a backendConn uses it: a request
// is written whole (Write keeps it) and sent by the read of its answer.
//
// Why: a backend answers only what it is asked, so a read just after the
// request is written finds nothing yet and fails with EAGAIN before the
// goroutine waits for the connection: a system call for nothing, per
// request. Go's poller forgets a connection's past readiness when a read
// starts (RawConn.Read), so a read may wait before it tries only when no
// byte can have come before that: here the request is written from inside
// the read, after that point, and what the backend sends in answer is
// sure to wake the wait. Where the connection offers no RawConn (tests'
// pipes), the request is written and read as usual.
type askingConn struct {
	conn    net.Conn
	raw     syscall.RawConn // nil: plain writes and reads
	pending []byte          // the request written and not sent yet
	// One Read's state, for step (a method value made once: a closure
	// per Read would be an allocation per request).
	step    func(fd uintptr) bool
	p       []byte // where to read
	sent, n int
	err     error
	wrote   bool // the writes are over: wait, then read
	short   bool // the socket took only part: the rest goes as usual
}

func newAskingConn(conn net.Conn) *askingConn {
	a := &askingConn{conn: conn}
	// Only a TCP connection: the wait relies on a socket's poller
	// readiness, which other syscall.Conns (files, TLS wrappers) need not
	// follow alike.
	if tc, ok := conn.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			a.raw = raw
			a.step = a.sendThenRead
		}
	}
	return a
}

// Write keeps p for the next Read to send (or sends it at once without a
// RawConn).
func (a *askingConn) Write(p []byte) (int, error) {
	if a.raw == nil {
		return a.conn.Write(p)
	}
	a.pending = append(a.pending, p...)
	return len(p), nil
}

// Read sends what was written, then waits for the connection to be
// readable and reads it once.
func (a *askingConn) Read(p []byte) (int, error) {
	if len(a.pending) == 0 || len(p) == 0 {
		return a.conn.Read(p)
	}
	a.p, a.sent, a.n, a.err, a.wrote, a.short = p, 0, 0, nil, false, false
	err := a.raw.Read(a.step)
	rest := a.pending[a.sent:]
	a.pending, a.p = a.pending[:0], nil
	if err != nil {
		// The poller's error (a deadline passed, the connection closed),
		// as net.Conn.Read gives it.
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: a.conn.LocalAddr(), Addr: a.conn.RemoteAddr(), Err: err}
	}
	if a.short {
		if _, err := a.conn.Write(rest); err != nil {
			return 0, err
		}
		return a.conn.Read(p)
	}
	return a.n, a.err
}

// sendThenRead is Read's step under RawConn.Read: it writes what is
// pending, then (called again once the connection is readable) reads;
// false to wait for readability.
func (a *askingConn) sendThenRead(fd uintptr) bool {
	for !a.wrote {
		w, err := syscall.Write(int(fd), a.pending[a.sent:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			a.short = true
			return true
		case err != nil:
			a.err = &net.OpError{Op: "write", Net: "tcp", Source: a.conn.LocalAddr(), Addr: a.conn.RemoteAddr(), Err: os.NewSyscallError("write", err)}
			return true
		}
		if a.sent += w; a.sent == len(a.pending) {
			a.wrote = true
			return false // the answer cannot be there yet: wait for it
		}
	}
	for {
		r, err := syscall.Read(int(fd), a.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			a.err = &net.OpError{Op: "read", Net: "tcp", Source: a.conn.LocalAddr(), Addr: a.conn.RemoteAddr(), Err: os.NewSyscallError("read", err)}
		case r == 0:
			a.err = io.EOF
		default:
			a.n = r
		}
		return true
	}
}
