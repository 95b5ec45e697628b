package dispatcherclient

import (
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// A member named by its endpoint task (members_kept) is made from the
// endpoint task held, with its address and node; one whose endpoint task
// the node no longer holds but whose member it does (a stream resumed a
// little before the node's point) is left as it is; one held neither way
// fails the delta, for the stream to start again with a whole set.
func TestMembersKeptFromTheEndpointTasksHeld(t *testing.T) {
	t.Parallel()
	ready := func(name, ip string) *endpoints.Task { return &endpoints.Task{Name: name, IP: ip, Node: "node-b"} }
	start := func() *state {
		s := stateOf(agent.Assignments{
			Endpoints: []*endpoints.Service{{Namespace: "web", Name: "s", Tasks: []*endpoints.Task{ready("t1", "10.200.0.11"), ready("t2", "10.200.0.12")}}},
			Policies: &endpoints.Policies{Members: endpoints.MembersOf([]*endpoints.Member{
				{Namespace: "web", Service: "s", Task: "t1", IP: "10.200.0.11", Node: "node-b"},
				{Namespace: "web", Service: "s", Task: "t2", IP: "10.200.0.12", Node: "node-b"},
				{Namespace: "web", Service: "s", Task: "t3", IP: "10.200.0.13", Node: "node-b"}})},
		})
		if err := s.apply(&legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	members := func(s *state) string {
		var out []string
		for m := range s.assignments().Policies.Members.All() {
			out = append(out, m.Task+"="+m.IP)
		}
		slices.Sort(out) // the lone members, then those of the endpoints
		return strings.Join(out, " ")
	}

	s := start()
	err := s.apply(&legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
		EndpointTaskChanges: &legionpb.Items{Removed: []string{"web\x00s\x00t1"}},
		MembersKept:         []string{"web\x00s\x00t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := members(s), "t1=10.200.0.11 t2=10.200.0.12 t3=10.200.0.13"; got != want {
		t.Errorf("kept: members %q; want %q", got, want)
	}
	if n := len(s.assignments().Endpoints[0].Tasks); n != 1 {
		t.Errorf("kept: %d endpoint tasks; want 1", n)
	}
	// Named again (a resumed stream), its endpoint task gone and its
	// member held: left as it is.
	err = s.apply(&legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
		EndpointTaskChanges: &legionpb.Items{Removed: []string{"web\x00s\x00t1"}},
		MembersKept:         []string{"web\x00s\x00t1"}})
	if err != nil {
		t.Fatalf("named again: %v", err)
	}
	if got, want := members(s), "t1=10.200.0.11 t2=10.200.0.12 t3=10.200.0.13"; got != want {
		t.Errorf("named again: members %q; want %q", got, want)
	}

	s = start()
	err = s.apply(&legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true, MembersKept: []string{"web\x00s\x00t9"}})
	if err == nil || !strings.Contains(err.Error(), `member kept "web/s/t9": no such endpoint task held`) {
		t.Errorf("an endpoint task held neither way: %v", err)
	}
}
