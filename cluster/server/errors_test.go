package server

import (
	"fmt"
	"testing"

	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Only a write refused before raft took it carries RetryInfo: a client
// sends that one again, and not one whose outcome is unknown.
func TestOnlyWritesThatCannotHaveAppliedSayRetry(t *testing.T) {
	t.Parallel()
	retryInfo := func(err error) bool {
		for _, d := range status.Convert(err).Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		err   error
		retry bool
	}{
		{store.ErrNotLeader, true},
		{fmt.Errorf("%w: leadership lost during the write: the write may still apply", store.ErrNoQuorum), false},
		{fmt.Errorf("%w: no quorum answered the write within 5s: the write may still apply", store.ErrNoQuorum), false},
		{store.ErrClosed, false},
	} {
		st := toStatus(c.err)
		if status.Code(st) != codes.Unavailable || retryInfo(st) != c.retry {
			t.Errorf("%v: %v, RetryInfo %v; want UNAVAILABLE, RetryInfo %v", c.err, st, retryInfo(st), c.retry)
		}
	}
	if err := notApplied("no leader: an election is in progress"); !retryInfo(err) || status.Code(err) != codes.Unavailable {
		t.Errorf("notApplied: %v", err)
	}
}
