package resolver

import (
	"errors"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// maxUDPSockets bounds how many UDP sockets (and loops) Serve opens on
// its address.
const maxUDPSockets = 8

// serveUDP answers the queries arriving on one UDP socket until it is
// closed. The loop owns its buffers and its request and reply messages
// and reuses them from one query to the next; a query that must go
// upstream is handed, with its request, to a goroutine of its own that
// writes the answer when it comes.
func (s *Server) serveUDP(pc net.PacketConn) error {
	u, _ := pc.(*net.UDPConn)
	if u != nil && batchUDP && !s.oneByOne {
		return s.serveUDPBatch(u)
	}
	in := make([]byte, dns.MaxMsgSize)
	out := make([]byte, dns.MaxMsgSize)
	req, m := new(dns.Msg), new(dns.Msg)
	for {
		var n int
		var from netip.AddrPort
		var addr net.Addr
		var err error
		if u != nil {
			n, from, err = u.ReadFromUDPAddrPort(in)
		} else {
			n, addr, err = pc.ReadFrom(in)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		// Unreadable messages and answers get no answer: any reply could
		// serve to amplify or loop (as miekg/dns's server does).
		if req.Unpack(in[:n]) != nil || req.Response {
			continue
		}
		if s.respond(m, req) {
			s.writeUDP(pc, u, from, addr, m, req, out)
			continue
		}
		s.forwards.Add(1)
		go func(req *dns.Msg) {
			defer s.forwards.Done()
			m := new(dns.Msg)
			s.forward(m, req, true)
			s.writeUDP(pc, u, from, addr, m, req, nil)
		}(req)
		req = new(dns.Msg) // that one is the goroutine's now
	}
}

// packUDP packs m into buf, truncated to what the client said it takes
// (TC set: it asks again over TCP).
func (s *Server) packUDP(m, req *dns.Msg, buf []byte) ([]byte, bool) {
	// Uncompressed first, as Truncate would leave it: most answers fit
	// so, and compressing costs a map. Then compressed, then truncated.
	m.Compress = false
	wire, err := m.PackBuffer(buf)
	if size := udpSize(req); err == nil && len(wire) > size {
		m.Compress = true
		if wire, err = m.PackBuffer(buf); err == nil && len(wire) > size {
			m.Truncate(size)
			wire, err = m.PackBuffer(buf)
		}
	}
	if err != nil {
		s.Logger.Debug("packing an answer", "err", err)
		return nil, false
	}
	return wire, true
}

// writeUDP packs m into buf and sends it.
func (s *Server) writeUDP(pc net.PacketConn, u *net.UDPConn, to netip.AddrPort, addr net.Addr, m, req *dns.Msg, buf []byte) {
	wire, ok := s.packUDP(m, req, buf)
	if !ok {
		return
	}
	var err error
	if u != nil {
		_, err = u.WriteToUDPAddrPort(wire, to)
	} else {
		_, err = pc.WriteTo(wire, addr)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.Logger.Debug("UDP write", "err", err)
	}
}
