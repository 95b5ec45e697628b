package dispatcher

import (
	"slices"
	"testing"

	"github.com/legionbsd/legion"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// A ready task told to stop leaves the endpoints at once but stays a
// member, in the same set, until it has stopped: nodes keep its
// connections' states through its drain, and kill them once it is gone.
func TestADrainingTaskStaysAMemberUntilStopped(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	putSynced(t, ctx, st, c, svc)
	putSynced(t, ctx, st, c, tk)
	stream := &streamState{node: "n2", shape: shape{apart: true, lone: true}}
	if set, _, err := s.compose(st, c, stream, true); err != nil || set == nil {
		t.Fatalf("first set: %v, %v", set, err)
	}
	next := func(what string) *legionpb.AssignmentSet {
		t.Helper()
		set, _, err := s.compose(st, c, stream, false)
		if err != nil || set == nil {
			t.Fatalf("%s: sent %v, %v", what, set, err)
		}
		return set
	}
	member, endpoint := "shop\x00web-1-1", "shop\x00web\x00web-1-1"

	tk.Spec.DesiredState = legion.TaskShutdown
	putSynced(t, ctx, st, c, tk)
	set := next("told to stop")
	if got := set.GetEndpointTaskChanges().GetRemoved(); !slices.Equal(got, []string{endpoint}) {
		t.Errorf("told to stop: endpoints removed %q; want %q", got, endpoint)
	}
	if got := set.GetMemberChanges().PutMap(); got[member] == nil {
		t.Errorf("told to stop: members put %d, none of them %q: nodes would take it for gone", len(got), member)
	}

	tk.Status.State, tk.Status.Ready = legion.TaskShutdown, false
	putSynced(t, ctx, st, c, tk)
	set = next("stopped")
	if got := set.GetMemberChanges().GetRemoved(); !slices.Equal(got, []string{member}) {
		t.Errorf("stopped: members removed %q; want %q", got, member)
	}
}
