package ingress

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"

	"github.com/pires/go-proxyproto"
)

// hop is how a request reached the proxy: the client it stands for, the
// scheme the client used, the peer that connected, and the chain of
// addresses to pass on.
type hop struct {
	client netip.Addr
	proto  string
	peer   netip.Addr
	// chain is X-Forwarded-For to send: the believed incoming chain and
	// the peer.
	chain []string
	// forwarded is the believed incoming Forwarded header, "" if none.
	forwarded string
}

// hopOf reads where r came from. The client's own X-Forwarded-For,
// X-Forwarded-Proto and Forwarded are believed only from a trusted peer
// (a proxy in front the route names); then the client is the nearest
// address in the chain that is not itself a trusted proxy. From anyone
// else those headers are dropped, so no client can choose the address a
// backend sees.
func hopOf(r *http.Request, trusted []netip.Prefix) hop {
	h := hop{proto: "http"}
	if r.TLS != nil {
		h.proto = "https"
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		h.peer = ap.Addr().Unmap()
	}
	h.client = h.peer
	if !h.peer.IsValid() || !trusts(trusted, h.peer) {
		h.chain = []string{h.peer.String()}
		return h
	}
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				h.chain = append(h.chain, a)
			}
		}
	}
	for i := len(h.chain) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(h.chain[i])
		if err != nil {
			break // a chain we cannot read further: stop at what we trust
		}
		h.client = a.Unmap()
		if !trusts(trusted, h.client) {
			break
		}
	}
	h.chain = append(h.chain, h.peer.String())
	if p := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto"))); p == "http" || p == "https" {
		h.proto = p
	}
	h.forwarded = strings.Join(r.Header.Values("Forwarded"), ", ")
	return h
}

func trusts(trusted []netip.Prefix, a netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// setHeaders gives the backend the client's address and scheme, in the
// headers backends read: X-Forwarded-For (the chain), X-Forwarded-Proto,
// X-Forwarded-Host, X-Real-IP (the client) and Forwarded (RFC 7239, with
// this hop's element after the believed ones).
func (h hop) setHeaders(inHost string, out http.Header) {
	// The values in one array: one allocation where Header.Set makes one
	// a header.
	v := h.forwardingValues(inHost)
	vs := v[:]
	for i, k := range forwardingKeys {
		out[k] = vs[i : i+1 : i+1]
	}
}

// forwardingKeys are the headers setHeaders sets, in canonical form.
var forwardingKeys = [...]string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip", "Forwarded"}

// forwardingValues are the values of forwardingKeys.
func (h hop) forwardingValues(inHost string) [len(forwardingKeys)]string {
	peer := h.chain[len(h.chain)-1] // h.peer.String()
	client, node := peer, peer
	if h.client != h.peer {
		client = h.client.String()
	}
	if !h.peer.Is4() {
		node = forwardedNode(h.peer)
	}
	el := "for=" + node + ";host=" + quoteForwarded(inHost) + ";proto=" + h.proto
	if h.forwarded != "" {
		el = h.forwarded + ", " + el
	}
	return [...]string{strings.Join(h.chain, ", "), h.proto, inHost, client, el}
}

// appendForwarding appends the header lines setHeaders would set to b.
func (h hop) appendForwarding(b []byte, inHost string) []byte {
	for i, v := range h.forwardingValues(inHost) {
		b = append(b, forwardingKeys[i]...)
		b = append(b, ": "...)
		b = append(b, v...)
		b = append(b, "\r\n"...)
	}
	return b
}

// ownPeer is whether h names no one but the peer: its fields then depend
// only on the peer, the scheme and the host.
func (h hop) ownPeer() bool {
	return len(h.chain) == 1 && h.forwarded == "" && h.client == h.peer
}

// forwardedNode writes an address as RFC 7239 wants it: IPv6 quoted in
// brackets.
func forwardedNode(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	if a.Is6() {
		return `"[` + a.String() + `]"`
	}
	return a.String()
}

func quoteForwarded(s string) string {
	if strings.ContainsAny(s, `:;,"= `) {
		return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
	}
	return s
}

// clientConnKey carries, to the dial of a PROXY protocol connection, the
// client and the address it reached.
type clientConnKey struct{}

type clientConn struct{ src, dst net.Addr }

// withClientConn puts the request's client and local addresses on the
// outgoing request's context for dialProxyProtocol.
func withClientConn(pr *httputil.ProxyRequest, h hop) {
	dst, _ := pr.In.Context().Value(http.LocalAddrContextKey).(net.Addr)
	port := 0
	if ap, err := netip.ParseAddrPort(pr.In.RemoteAddr); err == nil {
		port = int(ap.Port())
	}
	src := &net.TCPAddr{IP: h.client.AsSlice(), Port: port}
	pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), clientConnKey{}, clientConn{src: src, dst: dst}))
}

// dialProxyProtocol dials a backend and opens the connection with a PROXY
// protocol header (version 1 or 2) naming the request's client.
func dialProxyProtocol(dial func(ctx context.Context, network, addr string) (net.Conn, error), version byte) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc, _ := ctx.Value(clientConnKey{}).(clientConn)
		dst := cc.dst
		if dst == nil {
			dst = conn.LocalAddr()
		}
		src := cc.src
		if src == nil {
			src = conn.LocalAddr()
		}
		if _, err := proxyproto.HeaderProxyFromAddrs(version, src, dst).WriteTo(conn); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}
