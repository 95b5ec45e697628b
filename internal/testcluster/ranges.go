package testcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/loopback"
)

// taken holds the second octets this test binary has handed out, so two
// clusters of one binary never share a range even before either binds.
var taken struct {
	sync.Mutex
	octets map[byte]bool
}

// FreePlan is a fresh pod and service range pair for t's test cluster:
// one whose 127/8 images no socket of this host uses (a user's cluster, a
// test of another package), no cluster of this binary has had and no
// other test binary holds, found from a random start. Every cluster the
// harness makes gets one; other binaries may have it once t is done.
func FreePlan(t testing.TB) (addrplan.Plan, error) {
	taken.Lock()
	defer taken.Unlock()
	used, err := loopback.UsedOctets(loopback.ProcNet)
	if err != nil {
		return addrplan.Plan{}, err
	}
	if taken.octets == nil {
		taken.octets = map[byte]bool{}
	}
	for o := range taken.octets {
		used[o] = true
	}
	for {
		p, err := loopback.FreePlan(addrplan.Plan{}, used, nil, rand.IntN(1<<16))
		if err != nil {
			return addrplan.Plan{}, err
		}
		ok := true
		for _, o := range []byte{p.PodOctet(), p.ServiceOctet()} {
			var release func()
			if release, ok = claim(o); !ok {
				used[o] = true // another binary's: draw again
				break
			}
			t.Cleanup(release)
			used[o], taken.octets[o] = true, true
		}
		if ok {
			return p, nil
		}
	}
}

// claim holds octet o against the other test binaries of this host (go
// test runs packages side by side) until release: a range's sockets are
// bound only once its cluster's pods start, so until then UsedOctets
// cannot see it taken. On Linux the claim is an abstract unix socket
// named after the octet, which leaves no file and which the kernel frees
// when the process ends, if release did not; not ok when another process
// holds it. Elsewhere every claim succeeds.
func claim(o byte) (release func(), ok bool) {
	if runtime.GOOS != "linux" {
		return func() {}, true
	}
	l, err := net.Listen("unix", claimName(o))
	if err != nil {
		return nil, false
	}
	return func() { l.Close() }, true
}

// claimName is the abstract unix socket that claims octet o.
func claimName(o byte) string { return fmt.Sprintf("@legion-test-octet-%d", o) }

// ranges is server.Config.Ranges for t's harness: the asked ranges, the
// others fresh.
func ranges(t testing.TB, asked addrplan.Plan) (addrplan.Plan, error) {
	p, err := FreePlan(t)
	if err != nil {
		return addrplan.Plan{}, fmt.Errorf("test cluster ranges: %w", err)
	}
	if asked.Pod.IsValid() {
		p.Pod = asked.Pod
	}
	if asked.Service.IsValid() {
		p.Service = asked.Service
	}
	return p, nil
}
