// Package testaddr hands tests loopback ports for the servers they start,
// often in another process and often again at the same address after a
// stop: a manager keeps its address across restarts, since Raft knows it
// by it.
//
// A port the kernel picked for a listener of its own (port 0) and then
// freed is one of its ephemeral ports, which it also hands to outgoing
// connections: between the pick and the server's bind, or between a stop
// and a restart, a connection of another test could take it, and the
// server then failed with "address already in use". So on Linux the port
// is drawn at random below the ephemeral range, where no outgoing
// connection goes; elsewhere the kernel picks. Either way nothing listens
// on it when it is handed out, and no port is handed out twice in one
// process.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var handed struct {
	sync.Mutex
	ports map[int]bool
}

// Port is a TCP port of 127.0.0.1 that nothing listens on now.
func Port(t testing.TB) int {
	t.Helper()
	handed.Lock()
	defer handed.Unlock()
	if handed.ports == nil {
		handed.ports = map[int]bool{}
	}
	lo, hi, ok := belowEphemeral()
	for try := 0; try < 1000; try++ {
		want := 0
		if ok {
			want = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(want)))
		if err != nil {
			continue // held: another draw
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handed.ports[port] {
			handed.ports[port] = true
			return port
		}
	}
	t.Fatalf("no free loopback port found in 1000 draws (from %d to %d)", lo, hi)
	return 0
}

// Loopback is 127.0.0.1 at a Port.
func Loopback(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Port(t))
}

// belowEphemeral is the range ports are drawn from, [lo, hi): the half
// below the start of Linux's ephemeral ports; not ok where the system
// does not say what those are, or they start too low to leave room.
func belowEphemeral() (lo, hi int, ok bool) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(data)) // "32768	60999"
	if len(fields) == 0 {
		return 0, 0, false
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil || first < 4096 {
		return 0, 0, false
	}
	return first / 2, first, true
}
