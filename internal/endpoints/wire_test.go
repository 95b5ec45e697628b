package endpoints_test

import (
	"testing"

	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// A member and an endpoint task come back from the wire format as they
// went in, empty fields, other scripts and negative slots included, and
// the generated messages read what was written as the same fields.
func TestWireRoundTrip(t *testing.T) {
	members := []endpoints.Member{
		{},
		{Namespace: "shop", Service: "web", Task: "web-1-abc", IP: "10.200.0.5", Node: "n1"},
		{Namespace: "ünï", Task: "job-1", IP: "fd00::5", Node: "节点"},
	}
	for _, m := range members {
		data := endpoints.MemberWire(&m)
		got, err := endpoints.MemberFromWire(data)
		if err != nil || *got != m {
			t.Fatalf("member %+v came back as %+v (%v)", m, got, err)
		}
		var pm legionpb.PolicyMember
		if err := proto.Unmarshal(data, &pm); err != nil ||
			(endpoints.Member{Namespace: pm.Namespace, Service: pm.Service, Task: pm.Task, IP: pm.Ip, Node: pm.Node}) != m {
			t.Fatalf("member %+v read by the generated decoder as %v (%v)", m, &pm, err)
		}
	}
	tasks := []endpoints.Task{{}, {Name: "web-1-abc", IP: "10.200.0.5", Node: "n1", Slot: 7}, {Name: "x", Slot: -3}}
	for _, tk := range tasks {
		data := endpoints.TaskWire(tk)
		got, err := endpoints.TaskFromWire(data)
		if err != nil || got != tk {
			t.Fatalf("endpoint task %+v came back as %+v (%v)", tk, got, err)
		}
		var et legionpb.EndpointTask
		if err := proto.Unmarshal(data, &et); err != nil ||
			(endpoints.Task{Name: et.Name, IP: et.Ip, Node: et.Node, Slot: int(et.Slot)}) != tk {
			t.Fatalf("endpoint task %+v read by the generated decoder as %v (%v)", tk, &et, err)
		}
	}
	if _, err := endpoints.MemberFromWire([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("a member cut short decoded")
	}
}

// Whatever the generated decoder reads as a PolicyMember or an
// EndpointTask, the agent's reader reads the same: what a newer manager
// adds to them, or sends in another wire type, is left out alike.
func FuzzWire(f *testing.F) {
	m := endpoints.MemberWire(&endpoints.Member{Namespace: "shop", Service: "web", Task: "web-1", IP: "10.0.0.1", Node: "n1"})
	f.Add(m)
	f.Add(endpoints.TaskWire(endpoints.Task{Name: "web-1", IP: "10.0.0.1", Node: "n1", Slot: 3}))
	f.Add(append(append([]byte{}, m...), 0x30, 0x01, 0x0a, 0x01, 'x')) // an unknown varint, then the namespace again
	f.Add([]byte{0x08, 0x01, 0x20, 0x0a})                              // a varint where a string goes
	f.Fuzz(func(t *testing.T, data []byte) {
		var pm legionpb.PolicyMember
		if proto.Unmarshal(data, &pm) == nil {
			got, err := endpoints.MemberFromWire(data)
			want := endpoints.Member{Namespace: pm.Namespace, Service: pm.Service, Task: pm.Task, IP: pm.Ip, Node: pm.Node}
			if err != nil || *got != want {
				t.Fatalf("member: read %+v (%v), the generated decoder %+v", got, err, want)
			}
		}
		var et legionpb.EndpointTask
		if proto.Unmarshal(data, &et) == nil {
			got, err := endpoints.TaskFromWire(data)
			want := endpoints.Task{Name: et.Name, IP: et.Ip, Node: et.Node, Slot: int(et.Slot)}
			if err != nil || got != want {
				t.Fatalf("endpoint task: read %+v (%v), the generated decoder %+v", got, err, want)
			}
		}
	})
}
