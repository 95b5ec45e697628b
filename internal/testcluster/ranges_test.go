package testcluster_test

import (
	"net"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/netbsd/addrplan"
)

// claimOf listens on the claim of octet o as another test binary would.
func claimOf(o byte) (net.Listener, error) {
	return net.Listen("unix", testcluster.ClaimName(o))
}

// Octets another test binary claimed are not handed out, though no
// socket of theirs is bound yet: here this test holds three in four of
// the claims itself, as another process would (a plan takes two octets
// side by side: one pair in four is left).
func TestFreePlanSkipsOctetsAnotherBinaryClaimed(t *testing.T) {
	held := map[byte]bool{}
	var ls []net.Listener
	t.Cleanup(func() {
		for _, l := range ls {
			l.Close()
		}
	})
	// Another copy of this test (a second go test at once) holds most
	// claims for a moment: asked again until this one holds enough,
	// letting go of what it got between tries, so that two copies do not
	// each hold half and wait for the other.
	testcluster.WaitFor(t, "100 octets' claims held", 30*time.Second, func() bool {
		for o := range 256 {
			if o%8 == 2 || o%8 == 3 {
				continue // left for the plans
			}
			l, err := claimOf(byte(o))
			if err != nil {
				continue // a cluster of this binary or another has it
			}
			ls = append(ls, l)
			held[byte(o)] = true
		}
		if len(held) >= 100 {
			return true
		}
		for _, l := range ls {
			l.Close()
		}
		ls, held = nil, map[byte]bool{}
		return false
	})
	for range 5 {
		p, err := testcluster.FreePlan(t)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []byte{p.PodOctet(), p.ServiceOctet()} {
			if held[o] {
				t.Fatalf("plan %v uses octet %d, which another binary claimed", p, o)
			}
		}
	}
}

// A plan's claims last as long as its test: other binaries may have its
// octets then (a binary that held every plan's claims to its end ran the
// others out of ranges).
func TestFreePlanClaimsEndWithTheirTest(t *testing.T) {
	var p addrplan.Plan
	t.Run("cluster", func(t *testing.T) {
		var err error
		if p, err = testcluster.FreePlan(t); err != nil {
			t.Fatal(err)
		}
		for _, o := range []byte{p.PodOctet(), p.ServiceOctet()} {
			if l, err := claimOf(o); err == nil {
				l.Close()
				t.Fatalf("octet %d is not claimed while its test runs", o)
			}
		}
	})
	for _, o := range []byte{p.PodOctet(), p.ServiceOctet()} {
		l, err := claimOf(o)
		if err != nil {
			t.Fatalf("octet %d is still claimed after its test: %v", o, err)
		}
		l.Close()
	}
}
