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

// Asked with members_kept, a ready task told to stop is named by its
// endpoint task, which the node makes the member of, rather than sent as
// a member; but only to a node that held that endpoint task: a stream
// last sent before the task became ready gets the member whole.
func TestAStoppingTaskIsKeptByTheNodesThatHeldIt(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	tk.Status.Ready = false
	putSynced(t, ctx, st, c, svc)
	putSynced(t, ctx, st, c, tk)
	kept := shape{apart: true, lone: true, typed: true, kept: true}
	first := func(node string) *streamState {
		stream := &streamState{node: node, shape: kept}
		if set, _, err := s.compose(st, c, stream, true); err != nil || set == nil {
			t.Fatalf("first set of %s: %v, %v", node, set, err)
		}
		return stream
	}
	next := func(stream *streamState) *legionpb.AssignmentSet {
		t.Helper()
		set, _, err := s.compose(st, c, stream, false)
		if err != nil || set == nil {
			t.Fatalf("%s: sent %v, %v", stream.node, set, err)
		}
		return set
	}
	member, endpoint := "shop\x00web-1-1", "shop\x00web\x00web-1-1"

	before := first("n1") // the task running, not ready: a lone member
	tk.Status.Ready = true
	putSynced(t, ctx, st, c, tk)
	held := first("n2") // the task an endpoint task
	plain := &streamState{node: "n3", shape: shape{apart: true, lone: true, typed: true}}
	if _, _, err := s.compose(st, c, plain, true); err != nil {
		t.Fatal(err)
	}

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
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	putSynced(t, ctx, st, c, svc)
	putSynced(t, ctx, st, c, tk)
	stream := &streamState{node: "n1", shape: shape{apart: true, lone: true, typed: true, kept: true}}
	if _, _, err := s.compose(st, c, stream, true); err != nil {
		t.Fatal(err)
	}
	tk.Status.Ready, tk.Status.IP = false, "10.200.0.6"
	putSynced(t, ctx, st, c, tk)
	set, _, err := s.compose(st, c, stream, false)
	if err != nil || set == nil {
		t.Fatalf("sent %v, %v", set, err)
	}
	if got := set.GetMembersKept(); len(got) != 0 {
		t.Errorf("kept %q; want none", got)
	}
	if got := set.GetMemberChanges().PutMap(); got["shop\x00web-1-1"] == nil {
		t.Errorf("members put %d, not the task's", len(got))
	}
}
