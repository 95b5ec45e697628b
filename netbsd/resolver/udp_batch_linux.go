package resolver

import (
	"errors"
	"net"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpBatch is how many datagrams one system call reads or writes
// (recvmmsg, sendmmsg).
const udpBatch = 32

// batchUDP: Linux reads and writes UDP in batches.
const batchUDP = true

// batchConn is what ipv4 and ipv6's PacketConn share.
type batchConn interface {
	ReadBatch([]ipv4.Message, int) (int, error)
	WriteBatch([]ipv4.Message, int) (int, error)
}

// serveUDPBatch is serveUDP reading and writing up to udpBatch datagrams
// per system call: under load the queue holds several queries, and the
// system calls, not the answers, are most of a query's cost.
func (s *Server) serveUDPBatch(u *net.UDPConn) error {
	var bc batchConn = ipv4.NewPacketConn(u)
	if a, ok := u.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		bc = ipv6.NewPacketConn(u)
	}
	ins := make([]ipv4.Message, udpBatch)
	outs := make([]ipv4.Message, udpBatch)
	bufs := make([][]byte, udpBatch)
	for i := range ins {
		ins[i].Buffers = [][]byte{make([]byte, dns.DefaultMsgSize)}
		outs[i].Buffers = make([][]byte, 1)
		bufs[i] = make([]byte, dns.DefaultMsgSize)
	}
	req, m := new(dns.Msg), new(dns.Msg)
	for {
		n, err := bc.ReadBatch(ins, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		k := 0
		for i := range n {
			in := &ins[i]
			if req.Unpack(in.Buffers[0][:in.N]) != nil || req.Response {
				continue
			}
			if !s.respond(m, req) {
				s.forwards.Add(1)
				go func(req *dns.Msg, to net.Addr) {
					defer s.forwards.Done()
					m := new(dns.Msg)
					s.forward(m, req, true)
					if wire, ok := s.packUDP(m, req, nil); ok {
						u.WriteTo(wire, to)
					}
				}(req, in.Addr)
				req = new(dns.Msg)
				continue
			}
			wire, ok := s.packUDP(m, req, bufs[k])
			if !ok {
				continue
			}
			outs[k].Buffers[0], outs[k].Addr = wire, in.Addr
			k++
		}
		for sent := 0; sent < k; {
			w, err := bc.WriteBatch(outs[sent:k], 0)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				s.Logger.Debug("UDP write", "err", err)
				sent++ // that one is lost; the client asks again
				continue
			}
			sent += w
		}
	}
}
