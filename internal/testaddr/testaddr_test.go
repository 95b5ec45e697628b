package testaddr

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every port handed out is free, handed out once, and, where Linux says
// which ports outgoing connections take, below them.
func TestPortsAreFreeDistinctAndNotEphemeral(t *testing.T) {
	first := 0
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		first, _ = strconv.Atoi(strings.Fields(string(data))[0])
	}
	seen := map[int]bool{}
	for range 200 {
		p := Port(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if first > 4096 && (p >= first || p < first/2) {
			t.Fatalf("port %d: want one in [%d, %d), below the ephemeral ports", p, first/2, first)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d handed out is not free: %v", p, err)
		}
		l.Close()
	}
}
