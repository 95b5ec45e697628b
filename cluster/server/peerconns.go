package server

import (
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// peerConns are the open connections to this daemon's port whose peer
// presented a certificate the handshake verified, each with the
// certificates it presented. TLS checks a certificate once, at the
// handshake; a connection lives on after that, and every call on it
// with it. So when what the daemon trusts narrows (a CA rotation ends),
// cut closes the connections whose certificates no longer chain to a
// trusted CA: their holders reconnect, and a new handshake decides
// again. Nodes and users renewed under the new CA reconnect as after a
// manager's restart; a certificate of the old CA (one a removed manager
// could still make) is refused at that handshake.
type peerConns struct {
	mu    sync.Mutex
	conns map[*peerConn]struct{}
	// gen counts the cuts: a handshake that ran across one checks its
	// peer itself, since the cut may have passed it by.
	gen atomic.Uint64
}

// peerConn is a connection in peerConns, which it leaves when closed.
// (If gRPC fails to start its transport right after the handshake, it
// closes the raw connection rather than this one: the entry stays until
// the next cut, which closes it again and drops it.)
type peerConn struct {
	net.Conn
	peer []*x509.Certificate
	set  *peerConns
}

func (c *peerConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// cut closes the connections whose peer's certificates trusts no longer
// takes, and says how many it closed.
func (p *peerConns) cut(trusts func([]*x509.Certificate) bool) int {
	p.gen.Add(1)
	p.mu.Lock()
	var gone []*peerConn
	for c := range p.conns {
		if !trusts(c.peer) {
			gone = append(gone, c)
		}
	}
	p.mu.Unlock()
	for _, c := range gone {
		c.Close()
	}
	return len(gone)
}

// count is how many connections are held.
func (p *peerConns) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// errNoLongerTrusted refuses a connection whose handshake verified its
// peer against what the daemon trusted before a cut.
var errNoLongerTrusted = errors.New("the certificate's CA is no longer trusted: the cluster's CA was rotated")

// trackedCreds are transport credentials that put every connection with
// a verified peer certificate in conns; trusts says whether a peer's
// certificates chain to what the daemon trusts now.
type trackedCreds struct {
	credentials.TransportCredentials
	conns  *peerConns
	trusts func([]*x509.Certificate) bool
}

func (t trackedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	gen := t.conns.gen.Load() // before the handshake picks what it trusts
	conn, info, err := t.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		// No certificate (a join, init, a status on loopback): nothing a
		// CA's rotation takes away.
		return conn, info, nil
	}
	c := &peerConn{Conn: conn, peer: ti.State.PeerCertificates, set: t.conns}
	t.conns.mu.Lock()
	if t.conns.conns == nil {
		t.conns.conns = map[*peerConn]struct{}{}
	}
	t.conns.conns[c] = struct{}{}
	t.conns.mu.Unlock()
	if t.conns.gen.Load() != gen && !t.trusts(c.peer) {
		c.Close()
		return nil, nil, errNoLongerTrusted
	}
	return c, info, nil
}

func (t trackedCreds) Clone() credentials.TransportCredentials {
	return trackedCreds{TransportCredentials: t.TransportCredentials.Clone(), conns: t.conns, trusts: t.trusts}
}
