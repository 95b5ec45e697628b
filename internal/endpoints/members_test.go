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
