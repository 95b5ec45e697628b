package legionpb

import (
	"testing"

	"github.com/legionbsd/legion/internal/endpoints"
	"google.golang.org/protobuf/proto"
)

// A member and an endpoint task come back from their typed values as
// they went in, empty fields, other scripts and negative slots included.
func TestTypedValuesRoundTrip(t *testing.T) {
	members := []endpoints.Member{
		{},
		{Namespace: "shop", Service: "web", Task: "web-1-abc", IP: "10.200.0.5", Node: "n1"},
		{Namespace: "ünï", Task: "job-1", IP: "fd00::5", Node: "节点"},
	}
	for _, m := range members {
		data, err := MemberValue(&m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MemberOfValue(data)
		if err != nil || *got != m {
			t.Fatalf("member %+v came back as %+v (%v)", m, got, err)
		}
	}
	tasks := []endpoints.Task{{}, {Name: "web-1-abc", IP: "10.200.0.5", Node: "n1", Slot: 7}, {Name: "x", Slot: -3}}
	for _, tk := range tasks {
		data, err := EndpointTaskValue(tk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EndpointTaskOfValue(data)
		if err != nil || got != tk {
			t.Fatalf("endpoint task %+v came back as %+v (%v)", tk, got, err)
		}
	}
	if _, err := MemberOfValue([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("a member cut short decoded")
	}
}

// Whatever the generated decoder reads as a PolicyMember or an
// EndpointTask, the agent's reader reads the same: what a newer manager
// adds to them, or sends in another wire type, is left out alike.
func FuzzTypedValues(f *testing.F) {
	m, _ := MemberValue(&endpoints.Member{Namespace: "shop", Service: "web", Task: "web-1", IP: "10.0.0.1", Node: "n1"})
	tk, _ := EndpointTaskValue(endpoints.Task{Name: "web-1", IP: "10.0.0.1", Node: "n1", Slot: 3})
	f.Add(m)
	f.Add(tk)
	f.Add(append(append([]byte{}, m...), 0x30, 0x01, 0x0a, 0x01, 'x')) // an unknown varint, then the namespace again
	f.Add([]byte{0x08, 0x01, 0x20, 0x0a})                              // a varint where a string goes
	f.Fuzz(func(t *testing.T, data []byte) {
		var pm PolicyMember
		if proto.Unmarshal(data, &pm) == nil {
			got, err := MemberOfValue(data)
			want := endpoints.Member{Namespace: pm.Namespace, Service: pm.Service, Task: pm.Task, IP: pm.Ip, Node: pm.Node}
			if err != nil || *got != want {
				t.Fatalf("member: read %+v (%v), the generated decoder %+v", got, err, want)
			}
		}
		var et EndpointTask
		if proto.Unmarshal(data, &et) == nil {
			got, err := EndpointTaskOfValue(data)
			want := endpoints.Task{Name: et.Name, IP: et.Ip, Node: et.Node, Slot: int(et.Slot)}
			if err != nil || got != want {
				t.Fatalf("endpoint task: read %+v (%v), the generated decoder %+v", got, err, want)
			}
		}
	})
}
