package endpoints

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/legionbsd/legion/internal/jsonfast"
)

// TestMemberListIsItsMembersArray: a list's JSON is the array of its
// members however it is chunked, reads back equal, and a Policies
// without members leaves the field out, as the flat slice did.
func TestMemberListIsItsMembersArray(t *testing.T) {
	var ms []*Member
	for i := range 3*MemberChunk + 7 {
		ms = append(ms, &Member{Namespace: "ns", Task: fmt.Sprintf("t%04d", i), IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250), Node: "n1"})
	}
	l := MembersOf(ms)
	if l.Len() != len(ms) || len(l.chunks) != 4 {
		t.Fatalf("MembersOf: %d members in %d chunks", l.Len(), len(l.chunks))
	}
	got, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(ms)
	if string(got) != string(want) {
		t.Fatalf("JSON of the list differs from its members' array")
	}
	// Chunked otherwise, the same list.
	other := MemberChunks([][]*Member{ms[:1], nil, ms[1:500], ms[500:]})
	if !l.Equal(other) || !other.Equal(l) || !slices.Equal(other.Slice(), ms) {
		t.Fatal("the same members chunked otherwise are not an equal list")
	}
	changed := *ms[300]
	changed.IP = "10.9.9.9"
	if l.Equal(MembersOf(slices.Concat(ms[:300], []*Member{&changed}, ms[301:]))) || l.Equal(MembersOf(ms[1:])) {
		t.Fatal("lists with other members are equal")
	}
	for name, decode := range map[string]func([]byte, any) error{"encoding/json": json.Unmarshal, "jsonfast": jsonfast.Unmarshal} {
		var back MemberList
		if err := decode(got, &back); err != nil || !back.Equal(l) {
			t.Fatalf("%s: read back %d members (%v), want the %d written", name, back.Len(), err, l.Len())
		}
		var p Policies
		if err := decode([]byte(`{"members":null}`), &p); err != nil || p.Members.Len() != 0 {
			t.Fatalf("%s: null members: %d, %v", name, p.Members.Len(), err)
		}
	}
	empty, err := json.Marshal(Policies{})
	if err != nil || string(empty) != `{}` {
		t.Fatalf("policies without members: %s, %v", empty, err)
	}
	full, _ := json.Marshal(Policies{Members: MembersOf(ms[:1])})
	if string(full) != `{"members":[{"namespace":"ns","task":"t0000","ip":"10.0.0.0","node":"n1"}]}` {
		t.Fatalf("policies with a member: %s", full)
	}
}

// TestMemberListWithServices: a service's ready tasks stand for members
// of its namespace and service, after the chunks' members; the list is
// equal to the flat list of the same members in key order, and its JSON
// reads back equal.
func TestMemberListWithServices(t *testing.T) {
	job := &Member{Namespace: "web", Task: "j1", IP: "10.0.0.1", Node: "n1"}
	notReady := &Member{Namespace: "web", Service: "api", Task: "api-3", IP: "10.0.0.4", Node: "n2"}
	api := &Service{Namespace: "web", Name: "api", Tasks: []*Task{
		{Name: "api-1", IP: "10.0.0.2", Node: "n1"}, {Name: "api-2", IP: "10.0.0.3", Node: "n2"}}}
	empty := &Service{Namespace: "web", Name: "db"}
	l := MembersOf([]*Member{job, notReady}).WithServices([]*Service{api, empty})
	flat := MembersOf([]*Member{
		{Namespace: "web", Service: "api", Task: "api-1", IP: "10.0.0.2", Node: "n1"},
		{Namespace: "web", Service: "api", Task: "api-2", IP: "10.0.0.3", Node: "n2"},
		notReady, job})
	if l.Len() != 4 || !l.Equal(flat) || !flat.Equal(l) {
		t.Fatalf("with services: %d members %v, want the 4 of %v", l.Len(), l.Slice(), flat.Slice())
	}
	var tasks []string
	for m := range l.All() {
		tasks = append(tasks, m.Service+"/"+m.Task)
	}
	if want := []string{"/j1", "api/api-3", "api/api-1", "api/api-2"}; !slices.Equal(tasks, want) {
		t.Fatalf("order: %v, want the chunks' members then the services' tasks %v", tasks, want)
	}
	moved := *api
	moved.Tasks = []*Task{api.Tasks[0], {Name: "api-2", IP: "10.0.9.9", Node: "n2"}}
	if l.Equal(MembersOf([]*Member{job, notReady}).WithServices([]*Service{&moved})) {
		t.Fatal("a task at another address makes an equal list")
	}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back MemberList
	if err := jsonfast.Unmarshal(data, &back); err != nil || !back.Equal(l) || back.Len() != 4 {
		t.Fatalf("read back %d members (%v), want %v", back.Len(), err, l.Slice())
	}
}
