//go:build !linux && !freebsd

package resolver

import "net"

// listenUDP opens a UDP socket; more cannot share its address here.
func listenUDP(addr string) (*net.UDPConn, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

func isReusePort(*net.UDPConn) bool { return false }
