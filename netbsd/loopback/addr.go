package loopback

import (
	"fmt"
	"net/netip"
)

// Map moves a cluster address into 127.0.0.0/8 by replacing its first
// octet: pod 10.200.3.17 is 127.200.3.17 and VIP 10.201.0.5 is
// 127.201.0.5 on this network. Linux answers on every 127/8 address
// without configuration.
func Map(a netip.Addr) (netip.Addr, error) {
	if !a.Is4() {
		return netip.Addr{}, fmt.Errorf("loopback network: %s: only IPv4 addresses map into 127.0.0.0/8", a)
	}
	b := a.As4()
	b[0] = 127
	return netip.AddrFrom4(b), nil
}
