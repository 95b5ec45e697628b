package dispatcher

import (
	"testing"

	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// A stream that asks for typed values gets its member and endpoint task
// changes in the wire format, saying so in the set, in its fields or
// encoded in shared; one that does not gets JSON, as a manager from
// before sent. Both carry the same members and tasks under the same keys.
func TestTypedValuesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s, c, ctx := cacheOver(t, st)
	svc, tk := webAndItsTask()
	putSynced(t, ctx, st, c, svc)
	plain := &streamState{node: "n0", shape: shape{apart: true}}
	typed := &streamState{node: "n1", shape: shape{apart: true, typed: true}}
	wired := &streamState{node: "n2", shape: shape{apart: true, typed: true}, sharedWire: true}
	for _, ss := range []*streamState{plain, typed, wired} {
		if _, _, err := s.compose(st, c, ss, true); err != nil {
			t.Fatal(err)
		}
	}
	putSynced(t, ctx, st, c, tk)

	compose := func(ss *streamState) *legionpb.AssignmentSet {
		t.Helper()
		set, _, err := s.compose(st, c, ss, false)
		if err != nil || set == nil {
			t.Fatalf("node %s: %v, %v", ss.node, set, err)
		}
		return set
	}
	one := func(what string, it *legionpb.Items) *legionpb.Item {
		t.Helper()
		if it == nil || len(it.Put) != 1 {
			t.Fatalf("%s: %v, want one item put", what, it)
		}
		return it.Put[0]
	}
	p := compose(plain)
	if p.TypedValues {
		t.Fatal("a stream that did not ask was told its values are typed")
	}
	pm, pt := one("JSON members", p.MemberChanges), one("JSON endpoint tasks", p.EndpointTaskChanges)
	var wantM endpoints.Member
	var wantT endpoints.Task
	if err := jsonfast.Unmarshal(pm.Value, &wantM); err != nil {
		t.Fatalf("a JSON stream's member: %v", err)
	}
	if err := jsonfast.Unmarshal(pt.Value, &wantT); err != nil {
		t.Fatalf("a JSON stream's endpoint task: %v", err)
	}
	if wantM.IP != "10.200.0.5" || wantT.IP != "10.200.0.5" || wantT.Slot != 1 {
		t.Fatalf("member %+v, endpoint task %+v", wantM, wantT)
	}
	check := func(node string, set *legionpb.AssignmentSet) {
		t.Helper()
		if !set.TypedValues {
			t.Fatalf("node %s: typed values not said so", node)
		}
		m, tv := one(node+" typed members", set.MemberChanges), one(node+" typed endpoint tasks", set.EndpointTaskChanges)
		gotM, err := endpoints.MemberFromWire(m.Value)
		if err != nil || *gotM != wantM || m.Key != pm.Key {
			t.Fatalf("node %s: member %q %+v (%v), want %q %+v", node, m.Key, gotM, err, pm.Key, wantM)
		}
		gotT, err := endpoints.TaskFromWire(tv.Value)
		if err != nil || gotT != wantT || tv.Key != pt.Key {
			t.Fatalf("node %s: endpoint task %q %+v (%v), want %q %+v", node, tv.Key, gotT, err, pt.Key, wantT)
		}
	}
	check(typed.node, compose(typed))
	w := compose(wired)
	if w.MemberChanges != nil || len(sharedOf(w)) == 0 {
		t.Fatalf("node %s: want the changes in shared alone, got %v", wired.node, w)
	}
	check(wired.node, received(t, w))
}

// received is set as a node decodes it: marshalled as the stream sends
// it, unmarshalled into a new message.
func received(t *testing.T, set *legionpb.AssignmentSet) *legionpb.AssignmentSet {
	t.Helper()
	data, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var got legionpb.AssignmentSet
	if err := proto.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}
