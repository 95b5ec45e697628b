package loopback

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/legionbsd/legion/netbsd/addrplan"
)

// Image is where a cluster range sits on this network: 10.X.0.0/16 is
// 127.X.0.0/16 (Map, for a whole range).
func Image(r netip.Prefix) netip.Prefix {
	a, _ := Map(r.Addr())
	return netip.PrefixFrom(a, r.Bits())
}

// ProcNet is where UsedOctets reads this host's sockets: the reading
// thread's network namespace, not /proc/net's (the process's first
// thread's), since a process that starts pods in namespaces of their own
// may leave its first thread in one (a goroutine locked to it there is
// parked with it for good).
const ProcNet = "/proc/thread-self/net"

// UsedOctets is the set of second octets of the 127/8 addresses this
// host's sockets are bound or connected to (Linux: /proc/net/tcp, tcp6,
// udp, udp6 under procNet) or its interfaces carry (lo0 aliases on
// FreeBSD). Every node of a running cluster has its resolver on its
// gateway, so a cluster's pod range shows here as long as it runs:
// nothing is recorded that could outlive it.
func UsedOctets(procNet string) (map[byte]bool, error) {
	used := map[byte]bool{0: true} // 127.0.0.1 and friends
	note := func(a netip.Addr) {
		if a = a.Unmap(); a.Is4() && a.As4()[0] == 127 {
			used[a.As4()[1]] = true
		}
	}
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		data, err := os.ReadFile(filepath.Join(procNet, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			for _, ap := range fields[1:3] {
				if a, ok := procAddr(ap); ok {
					note(a)
				}
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this host's addresses: %w", err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Bits() > 8 {
			note(p.Addr()) // 127.0.0.1/8 on lo itself says nothing
		}
	}
	return used, nil
}

// procAddr reads "0100007F:1F90" (IPv4) or 32 hex digits (IPv6) as
// /proc/net prints them: 32-bit words in the host's order, which is
// little endian on every platform Legion runs on.
func procAddr(s string) (netip.Addr, bool) {
	h, _, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, false
	}
	out := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	a, ok := netip.AddrFromSlice(out)
	return a, ok
}

// FreePlan completes asked (zero prefixes for the ranges not given) with
// ranges whose 127/8 images no socket or address of this host uses and
// which overlap none of hostNets: pod 10.2k.0.0/16 with service
// 10.2k+1.0.0/16, trying k from start on (callers start at a random k so
// two clusters made at once rarely race for the same pair).
func FreePlan(asked addrplan.Plan, used map[byte]bool, hostNets []netip.Prefix, start int) (addrplan.Plan, error) {
	if asked.Pod.IsValid() && asked.Service.IsValid() {
		return asked, nil
	}
	taken := func(r netip.Prefix) bool {
		if used[Image(r).Addr().As4()[1]] {
			return true
		}
		for _, n := range hostNets {
			if n.Overlaps(r) {
				return true
			}
		}
		return asked.Pod.IsValid() && asked.Pod.Overlaps(r) || asked.Service.IsValid() && asked.Service.Overlaps(r)
	}
	const pairs = 126 // octets 2..253; 0 is 127.0.0.1's, 254 and 255 stay free
	for i := range pairs {
		k := 1 + (start+i)%pairs
		p := asked
		pod := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(2 * k), 0, 0}), 16)
		svc := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(2*k + 1), 0, 0}), 16)
		if !p.Pod.IsValid() {
			if taken(pod) {
				continue
			}
			p.Pod = pod
		}
		if !p.Service.IsValid() {
			if taken(svc) {
				continue
			}
			p.Service = svc
		}
		return p, nil
	}
	return addrplan.Plan{}, fmt.Errorf("loopback network: no free pair of /16s in 127.2.0.0-127.253.255.255 on this host: give --pod-cidr and --service-cidr")
}

// claimPort is the port of a range's claim (Claim). Only its pairing
// with the claim address matters: nothing else of Legion listens on the
// last address of a range's image.
const claimPort = 7479

// Claim makes choosing pod as a new cluster's range atomic across this
// host: it listens on the last address of pod's 127/8 image (the
// broadcast address of the range's last /24, which no pod or gateway
// takes), so a second cluster choosing at the same moment gets an error
// for which AlreadyClaimed holds, and one choosing later sees the socket
// in UsedOctets. The claim lasts until closed; by then the node's
// resolver or bridge shows the range. Where the image is not a local
// address (FreeBSD's lo0 holds only 127.0.0.1) nothing can be claimed:
// Claim returns a nil Closer and no error.
func Claim(pod netip.Prefix) (io.Closer, error) {
	img := Image(pod.Masked())
	last := img.Addr().As4()
	last[2], last[3] = 255, 255
	l, err := net.Listen("tcp4", netip.AddrPortFrom(netip.AddrFrom4(last), claimPort).String())
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claiming %s for this host's new cluster: %w", pod, err)
	}
	return l, nil
}

// AlreadyClaimed says whether Claim failed because another cluster of
// this host claimed the range first.
func AlreadyClaimed(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
