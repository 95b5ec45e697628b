package dispatcher

import (
	"context"
	"slices"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// webCached is a cache over a store holding webAndItsTask's service and
// task, ready or not.
func webCached(t *testing.T, ready bool) (*Service, *store.Store, *viewCache, context.Context, *legion.Task) {
	t.Helper()
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	tk.Status.Ready = ready
	putSynced(t, ctx, st, c, svc)
	putSynced(t, ctx, st, c, tk)
	return s, st, c, ctx, tk
}

// openStream is a stream of node in shape, sent its whole set.
func openStream(t *testing.T, s *Service, st *store.Store, c *viewCache, node string, sh shape) *streamState {
	t.Helper()
	stream := &streamState{node: node, shape: sh}
	if set, _, err := s.compose(st, c, stream, true); err != nil || set == nil {
		t.Fatalf("first set of %s: %v, %v", node, set, err)
	}
	return stream
}

// nextSet is the stream's next message, which must be a set.
func nextSet(t *testing.T, s *Service, st *store.Store, c *viewCache, stream *streamState) *legionpb.AssignmentSet {
	t.Helper()
	set, _, err := s.compose(st, c, stream, false)
	if err != nil || set == nil {
		t.Fatalf("%s: sent %v, %v", stream.node, set, err)
	}
	return set
}

// A ready task told to stop leaves the endpoints at once but stays a
// member, in the same set, until it has stopped: nodes keep its
// connections' states through its drain, and kill them once it is gone.
func TestADrainingTaskStaysAMemberUntilStopped(t *testing.T) {
	t.Parallel()
	s, st, c, ctx, tk := webCached(t, true)
	stream := openStream(t, s, st, c, "n2", shape{apart: true, lone: true})
	member, endpoint := "shop\x00web-1-1", "shop\x00web\x00web-1-1"

	tk.Spec.DesiredState = legion.TaskShutdown
	putSynced(t, ctx, st, c, tk)
	set := nextSet(t, s, st, c, stream)
	if got := set.GetEndpointTaskChanges().GetRemoved(); !slices.Equal(got, []string{endpoint}) {
		t.Errorf("told to stop: endpoints removed %q; want %q", got, endpoint)
	}
	if got := set.GetMemberChanges().PutMap(); got[member] == nil {
		t.Errorf("told to stop: members put %d, none of them %q: nodes would take it for gone", len(got), member)
	}

	tk.Status.State, tk.Status.Ready = legion.TaskShutdown, false
	putSynced(t, ctx, st, c, tk)
	set = nextSet(t, s, st, c, stream)
	if got := set.GetMemberChanges().GetRemoved(); !slices.Equal(got, []string{member}) {
		t.Errorf("stopped: members removed %q; want %q", got, member)
	}
}

// Asked with members_kept, a ready task told to stop is named by its
// endpoint task, which the node makes the member of, rather than sent as
// a member; but only to a node that held that endpoint task: a stream
// last sent before the task became ready gets the member whole.
func TestAStoppingTaskIsKeptByTheNodesThatHeldIt(t *testing.T) {
	t.Parallel()
	s, st, c, ctx, tk := webCached(t, false)
	kept := shape{apart: true, lone: true, typed: true, kept: true}
	next := func(stream *streamState) *legionpb.AssignmentSet { return nextSet(t, s, st, c, stream) }
	member, endpoint := "shop\x00web-1-1", "shop\x00web\x00web-1-1"

	before := openStream(t, s, st, c, "n1", kept) // the task running, not ready: a lone member
	tk.Status.Ready = true
	putSynced(t, ctx, st, c, tk)
	held := openStream(t, s, st, c, "n2", kept) // the task an endpoint task
	plain := openStream(t, s, st, c, "n3", shape{apart: true, lone: true, typed: true})

	tk.Spec.DesiredState = legion.TaskShutdown
	putSynced(t, ctx, st, c, tk)
	set := next(held)
	if got := set.GetMembersKept(); !slices.Equal(got, []string{endpoint}) {
		t.Errorf("to a node that held the endpoint task: kept %q; want %q", got, endpoint)
	}
	if got := set.GetMemberChanges().PutMap(); got[member] != nil {
		t.Errorf("to a node that held the endpoint task: the member was sent as well")
	}
	if got := set.GetEndpointTaskChanges().GetRemoved(); !slices.Equal(got, []string{endpoint}) {
		t.Errorf("endpoints removed %q; want %q", got, endpoint)
	}
	for _, stream := range []*streamState{before, plain} {
		set := next(stream)
		if got := set.GetMembersKept(); len(got) != 0 {
			t.Errorf("to %s: kept %q; want none", stream.node, got)
		}
		if got := set.GetMemberChanges().PutMap(); got[member] == nil {
			t.Errorf("to %s: members put %d, none of them %q", stream.node, len(got), member)
		}
	}

	tk.Status.State, tk.Status.Ready = legion.TaskShutdown, false
	putSynced(t, ctx, st, c, tk)
	set = next(held)
	if got := set.GetMemberChanges().GetRemoved(); !slices.Equal(got, []string{member}) {
		t.Errorf("stopped: members removed %q; want %q", got, member)
	}
}

// A task that leaves its endpoints with another address than its
// endpoint task had is sent as a member: the node would make the old one.
func TestATaskLeavingWithAnotherAddressIsNotKept(t *testing.T) {
	t.Parallel()
	s, st, c, ctx, tk := webCached(t, true)
	stream := openStream(t, s, st, c, "n1", shape{apart: true, lone: true, typed: true, kept: true})
	tk.Status.Ready, tk.Status.IP = false, "10.200.0.6"
	putSynced(t, ctx, st, c, tk)
	set := nextSet(t, s, st, c, stream)
	if got := set.GetMembersKept(); len(got) != 0 {
		t.Errorf("kept %q; want none", got)
	}
	if got := set.GetMemberChanges().PutMap(); got["shop\x00web-1-1"] == nil {
		t.Errorf("members put %d, not the task's", len(got))
	}
}
