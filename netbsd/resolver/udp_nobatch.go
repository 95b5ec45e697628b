//go:build !linux

package resolver

import "net"

// batchUDP: golang.org/x/net reads and writes one datagram per system
// call here anyway, so the plain loop does.
const batchUDP = false

func (s *Server) serveUDPBatch(*net.UDPConn) error { panic("no batches here") }
