package dispatcher

import (
	"strings"
	"testing"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// With no leader known, the refusal agents log names both an election
// and a cluster frozen without its majority, which the dispatcher cannot
// tell apart; with one, it names the leader, in the detail agents read.
func TestNotLeaderSaysWhatItCannotTell(t *testing.T) {
	none := status.Convert(notLeader(""))
	if none.Code() != codes.Unavailable || !strings.Contains(none.Message(), "an election is under way, or too few voting managers answer for one to be won") {
		t.Errorf("no leader known: %v", none.Err())
	}
	known := status.Convert(notLeader("10.0.0.1:7470"))
	var named string
	for _, d := range known.Details() {
		if nl, ok := d.(*legionpb.NotLeader); ok {
			named = nl.Leader
		}
	}
	if !strings.Contains(known.Message(), "the leader is at 10.0.0.1:7470") || named != "10.0.0.1:7470" {
		t.Errorf("a leader known: %v (detail %q)", known.Err(), named)
	}
}
