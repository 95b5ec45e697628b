package dispatcherclient

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// A stream that asks for members beside the endpoint tasks is sent as
// members only the tasks that are not endpoint tasks: a ready task of a
// service comes once, as an endpoint task, and the node makes its member
// from it. A task becoming ready leaves the members as it enters the
// endpoint tasks, one ceasing to be ready (or whose service goes) comes
// back, and at every step the node holds the members a whole set lists.
func TestMembersComeBesideEndpointTasks(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c := dialAs(t, m, "node-a")

	put := func(o legion.Object) uint64 {
		t.Helper()
		got, _, err := m.Store.Put(ctx, o, store.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetMetadata().Version
	}
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "web", Name: "s"}}}
	task := func(name string, owner legion.Kind, ready bool, ip string) *legion.Task {
		x := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Namespace: "web", Name: name}}}
		x.Spec.Node, x.Spec.DesiredState = "node-b", legion.TaskRunning
		x.Spec.Owner = legion.Owner{Kind: owner, Name: "s"}
		x.Status.State, x.Status.Ready, x.Status.IP = legion.TaskRunning, ready, ip
		return x
	}
	put(svc)
	put(task("t1", legion.KindService, true, "10.200.0.11"))
	put(task("t2", legion.KindService, false, "10.200.0.12"))
	put(task("j1", legion.KindJob, false, "10.200.0.13"))

	sctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	s, err := c.Assignments(sctx, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, TypedValues: true,
		MembersBesideEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil || first.GetDelta() {
		t.Fatalf("first message: delta %v, %v", first.GetDelta(), err)
	}
	as, err := decode(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberNames(as.Policies.Members); !slices.Equal(got, []string{"j1", "t1", "t2"}) {
		t.Fatalf("the whole set's members: %v, want every running task", got)
	}
	cur := stateOf(as)

	// step writes, then takes deltas until one at its version, and
	// checks what they carried and what the node then holds.
	type carried struct{ memberPut, memberGone, epPut, epGone []string }
	step := func(what string, write func() uint64, want carried) {
		t.Helper()
		at := write()
		var got carried
		for {
			set, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !set.GetMembersBesideEndpoints() {
				t.Fatalf("%s: a delta without members_beside_endpoints", what)
			}
			for _, it := range set.GetMemberChanges().GetPut() {
				got.memberPut = append(got.memberPut, it.GetKey())
			}
			got.memberGone = append(got.memberGone, set.GetMemberChanges().GetRemoved()...)
			for _, it := range set.GetEndpointTaskChanges().GetPut() {
				got.epPut = append(got.epPut, it.GetKey())
			}
			got.epGone = append(got.epGone, set.GetEndpointTaskChanges().GetRemoved()...)
			if err := cur.apply(set); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if set.GetVersion() >= at {
				break
			}
		}
		for _, l := range []*[]string{&got.memberPut, &got.memberGone, &got.epPut, &got.epGone, &want.memberPut, &want.memberGone, &want.epPut, &want.epGone} {
			slices.Sort(*l)
			*l = slices.Compact(*l)
		}
		if !slices.Equal(got.memberPut, want.memberPut) || !slices.Equal(got.memberGone, want.memberGone) ||
			!slices.Equal(got.epPut, want.epPut) || !slices.Equal(got.epGone, want.epGone) {
			t.Fatalf("%s: the deltas carried %q, want %q", what, got, want)
		}
		whole := wholeNow(ctx, t, c)
		held := cur.assignments()
		if !held.Policies.Members.Equal(whole.Policies.Members) {
			t.Fatalf("%s: the node holds members %v, a whole set lists %v", what, memberNames(held.Policies.Members), memberNames(whole.Policies.Members))
		}
		// The endpoint tasks stand for their members: the node keeps
		// none of its own for them.
		var eps []string
		for _, e := range whole.Endpoints {
			for _, t := range e.Tasks {
				eps = append(eps, t.Name)
			}
		}
		lone := slices.DeleteFunc(memberNames(whole.Policies.Members), func(n string) bool { return slices.Contains(eps, n) })
		if got := memberNames(cur.members.list()); !slices.Equal(got, lone) {
			t.Fatalf("%s: the node keeps members %v, want only those not endpoint tasks %v", what, got, lone)
		}
	}
	step("t2 becomes ready", func() uint64 { return put(task("t2", legion.KindService, true, "10.200.0.12")) },
		carried{memberGone: []string{"web\x00t2"}, epPut: []string{"web\x00s\x00t2"}})
	step("t1 is no longer ready", func() uint64 { return put(task("t1", legion.KindService, false, "10.200.0.11")) },
		carried{memberPut: []string{"web\x00t1"}, epGone: []string{"web\x00s\x00t1"}})
	step("t2 moves", func() uint64 { return put(task("t2", legion.KindService, true, "10.200.0.22")) },
		carried{epPut: []string{"web\x00s\x00t2"}})
	step("the service goes", func() uint64 {
		if _, err := m.Store.Delete(ctx, legion.KindService, "web", "s", store.Precondition{}); err != nil {
			t.Fatal(err)
		}
		v, _ := m.Store.Version()
		return v
	}, carried{memberPut: []string{"web\x00t2"}, epGone: []string{"web\x00s\x00t2"}})
	if got := memberNames(cur.assignments().Policies.Members); !slices.Equal(got, []string{"j1", "t1", "t2"}) {
		t.Fatalf("members at the end: %v", got)
	}
}

func memberNames(l endpoints.MemberList) []string {
	var out []string
	for m := range l.All() {
		out = append(out, m.Task)
	}
	return out
}

// A part sent whole (its log no longer reaching back to the stream's
// last message) replaces only what it stands for: lone members sent
// whole leave the members made from endpoint tasks, and endpoint tasks
// sent whole leave the lone members.
func TestMembersBesideTakeWholePartsApart(t *testing.T) {
	member := func(task, svc, ip string) *endpoints.Member {
		return &endpoints.Member{Namespace: "web", Service: svc, Task: task, IP: ip, Node: "n1"}
	}
	epTask := func(task, ip string) []byte {
		return []byte(`{"name":"` + task + `","ip":"` + ip + `","node":"n1"}`)
	}
	memberJSON := func(m *endpoints.Member) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// a and c are lone (a Job's task, a task not ready); b is an endpoint
	// task of service s.
	start := func() *state {
		as := agent.Assignments{Endpoints: []*endpoints.Service{{Namespace: "web", Name: "s",
			Tasks: []*endpoints.Task{{Name: "b", IP: "10.0.0.2", Node: "n1"}}}},
			Policies: &endpoints.Policies{Members: endpoints.MembersOf([]*endpoints.Member{
				member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2"), member("c", "s", "10.0.0.3")})}}
		return stateOf(as)
	}
	for _, tc := range []struct {
		what string
		set  *legionpb.AssignmentSet
		want []*endpoints.Member
	}{{
		what: "lone members whole",
		set: &legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
			MemberChanges: &legionpb.Items{Replace: true, Put: []*legionpb.Item{{Key: "web\x00d", Value: memberJSON(member("d", "", "10.0.0.4"))}}}},
		want: []*endpoints.Member{member("b", "s", "10.0.0.2"), member("d", "", "10.0.0.4")},
	}, {
		what: "endpoint tasks whole",
		set: &legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
			EndpointTaskChanges: &legionpb.Items{Replace: true, Put: []*legionpb.Item{{Key: "web\x00s\x00e", Value: epTask("e", "10.0.0.5")}}}},
		want: []*endpoints.Member{member("a", "", "10.0.0.1"), member("c", "s", "10.0.0.3"), member("e", "s", "10.0.0.5")},
	}, {
		what: "both whole",
		set: &legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
			MemberChanges:       &legionpb.Items{Replace: true},
			EndpointTaskChanges: &legionpb.Items{Replace: true, Put: []*legionpb.Item{{Key: "web\x00s\x00c", Value: epTask("c", "10.0.0.3")}}}},
		want: []*endpoints.Member{member("c", "s", "10.0.0.3")},
	}} {
		s := start()
		if err := s.apply(tc.set); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got := s.assignments().Policies.Members; !got.Equal(endpoints.MembersOf(tc.want)) {
			t.Errorf("%s: members %v, want %v", tc.what, memberNames(got), memberNames(endpoints.MembersOf(tc.want)))
		}
	}
}

// A stream whose manager sends every member (one from before members
// beside endpoint tasks, resuming where a stream of a newer one left the
// node) makes the node hold every member again, and endpoint tasks then
// stand for none; tasks held without their service's header still stand
// for members while they are apart.
func TestMembersApartAndBack(t *testing.T) {
	member := func(task, svc, ip string) *endpoints.Member {
		return &endpoints.Member{Namespace: "web", Service: svc, Task: task, IP: ip, Node: "n1"}
	}
	epTask := func(svc, task, ip string) *legionpb.Item {
		return &legionpb.Item{Key: "web\x00" + svc + "\x00" + task, Value: []byte(`{"name":"` + task + `","ip":"` + ip + `","node":"n1"}`)}
	}
	memberItem := func(m *endpoints.Member) *legionpb.Item {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return &legionpb.Item{Key: "web\x00" + m.Task, Value: b}
	}
	s := stateOf(agent.Assignments{Endpoints: []*endpoints.Service{{Namespace: "web", Name: "s",
		Tasks: []*endpoints.Task{{Name: "b", IP: "10.0.0.2", Node: "n1"}}}},
		Policies: &endpoints.Policies{Members: endpoints.MembersOf([]*endpoints.Member{
			member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2")})}})
	check := func(what string, want []*endpoints.Member, kept []string) {
		t.Helper()
		if got := s.assignments().Policies.Members; !got.Equal(endpoints.MembersOf(want)) {
			t.Fatalf("%s: members %v, want %v", what, memberNames(got), memberNames(endpoints.MembersOf(want)))
		}
		if got := memberNames(s.members.list()); !slices.Equal(got, kept) {
			t.Fatalf("%s: the node keeps members %v, want %v", what, got, kept)
		}
	}
	check("a whole set", []*endpoints.Member{member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2")}, []string{"a", "b"})

	apply := func(set *legionpb.AssignmentSet) {
		t.Helper()
		if err := s.apply(set); err != nil {
			t.Fatal(err)
		}
	}
	apply(&legionpb.AssignmentSet{Delta: true, MembersBesideEndpoints: true,
		EndpointTaskChanges: &legionpb.Items{Put: []*legionpb.Item{epTask("s", "c", "10.0.0.3"), epTask("gone", "d", "10.0.0.4")}}})
	check("apart", []*endpoints.Member{member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2"), member("c", "s", "10.0.0.3"),
		member("d", "gone", "10.0.0.4")}, []string{"a"})

	apply(&legionpb.AssignmentSet{Delta: true, MemberChanges: &legionpb.Items{Put: []*legionpb.Item{memberItem(member("e", "", "10.0.0.5"))}}})
	check("every member again", []*endpoints.Member{member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2"), member("c", "s", "10.0.0.3"),
		member("d", "gone", "10.0.0.4"), member("e", "", "10.0.0.5")}, []string{"a", "b", "c", "d", "e"})

	apply(&legionpb.AssignmentSet{Delta: true, EndpointTaskChanges: &legionpb.Items{Put: []*legionpb.Item{epTask("s", "f", "10.0.0.6")},
		Removed: []string{"web\x00s\x00b"}}})
	check("endpoint tasks with every member sent", []*endpoints.Member{member("a", "", "10.0.0.1"), member("b", "s", "10.0.0.2"),
		member("c", "s", "10.0.0.3"), member("d", "gone", "10.0.0.4"), member("e", "", "10.0.0.5")}, []string{"a", "b", "c", "d", "e"})
}
