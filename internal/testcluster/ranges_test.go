package testcluster_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/legionbsd/legion/internal/testcluster"
)

// Octets another test binary claimed are not handed out, though no
// socket of theirs is bound yet: here this test holds three in four of
// the claims itself, as another process would (a plan takes two octets
// side by side: one pair in four is left).
func TestFreePlanSkipsOctetsAnotherBinaryClaimed(t *testing.T) {
	held := map[byte]bool{}
	for o := range 256 {
		if o%8 == 2 || o%8 == 3 {
			continue // left for the plans
		}
		l, err := net.Listen("unix", fmt.Sprintf("@legion-test-octet-%d", o))
		if err != nil {
			continue // this binary's own cluster has it
		}
		t.Cleanup(func() { l.Close() })
		held[byte(o)] = true
	}
	if len(held) < 150 {
		t.Fatalf("held %d octets' claims; the test shows little", len(held))
	}
	for range 5 {
		p, err := testcluster.FreePlan()
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
