package dispatcherclient

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// benchState is a node's state in a cluster of the design's size: 200
// services of 100 ready tasks (20,000 policy members), 256 peers, and 80
// tasks of its own.
func benchState(b *testing.B) *state {
	b.Helper()
	const services, replicas = 200, 100
	var as agent.Assignments
	as.Policies = &endpoints.Policies{}
	var members []*endpoints.Member
	for s := range services {
		e := endpoints.Service{Namespace: "default", Name: fmt.Sprintf("svc-%03d", s), VIP: fmt.Sprintf("10.201.%d.%d", s/250, 1+s%250),
			Ports: []endpoints.Port{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: 8080}}}
		for r := range replicas {
			name := fmt.Sprintf("svc-%03d-%03d", s, r)
			ip := fmt.Sprintf("10.200.%d.%d", r, 2+s)
			node := fmt.Sprintf("node-%03d", (s*replicas+r)%256)
			e.Tasks = append(e.Tasks, &endpoints.Task{Name: name, IP: ip, Node: node, Slot: r + 1})
			members = append(members, &endpoints.Member{Namespace: "default", Task: name, Service: e.Name, IP: ip, Node: node})
		}
		as.Endpoints = append(as.Endpoints, &e)
	}
	as.Policies.Members = endpoints.MembersOf(members)
	for n := range 256 {
		as.Peers = append(as.Peers, endpoints.Peer{Name: fmt.Sprintf("node-%03d", n), PodCIDR: fmt.Sprintf("10.200.%d.0/24", n), PublicKey: "key"})
	}
	for i := range 80 {
		t := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Namespace: "default", Name: fmt.Sprintf("svc-%03d-%03d", i, 0)}}}
		as.Tasks = append(as.Tasks, t)
	}
	as.Tasks = nonNil(as.Tasks)
	return stateOf(as)
}

func mustJSON(b *testing.B, v any) []byte {
	b.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// applyInTurn applies the sets in turn, handing the state over after
// each, and checks each hand-over with ok.
func applyInTurn(b *testing.B, s *state, sets []*legionpb.AssignmentSet, ok func(agent.Assignments) error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.apply(sets[i%len(sets)]); err != nil {
			b.Fatal(err)
		}
		if err := ok(s.assignments()); err != nil {
			b.Fatal(err)
		}
	}
}

// has200Services checks a hand-over of benchState's services.
func has200Services(as agent.Assignments) error {
	if len(as.Endpoints) != 200 {
		return fmt.Errorf("%d services", len(as.Endpoints))
	}
	return nil
}

// BenchmarkMemberDeltaThenHandOver is what one policy member changing
// costs an agent of a 20,000-task cluster: the delta applied, then the
// set handed over (as in a rollout, a member comes or goes at each step).
func BenchmarkMemberDeltaThenHandOver(b *testing.B) {
	s := benchState(b)
	key := itemKey("default", "extra")
	put := &legionpb.AssignmentSet{Delta: true, MemberChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{
		key: mustJSON(b, endpoints.Member{Namespace: "default", Task: "extra", IP: "10.200.255.2", Node: "node-000"})})}}
	remove := &legionpb.AssignmentSet{Delta: true, MemberChanges: &legionpb.Items{Removed: []string{key}}}
	applyInTurn(b, s, []*legionpb.AssignmentSet{put, remove}, func(as agent.Assignments) error {
		if as.Policies.Members.Len() < 20000 {
			return fmt.Errorf("%d members", as.Policies.Members.Len())
		}
		return nil
	})
}

// BenchmarkEndpointDeltaThenHandOver is the same for one service's
// endpoints changing, sent as the whole service (every manager sends
// that to an agent that does not ask for endpoint tasks).
func BenchmarkEndpointDeltaThenHandOver(b *testing.B) {
	s := benchState(b)
	svc := s.assignments().Endpoints[7]
	less, more := svc, svc
	less.Tasks = svc.Tasks[1:]
	key := itemKey(svc.Namespace, svc.Name)
	sets := []*legionpb.AssignmentSet{
		{Delta: true, EndpointChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{key: mustJSON(b, less)})}},
		{Delta: true, EndpointChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{key: mustJSON(b, more)})}},
	}
	applyInTurn(b, s, sets, has200Services)
}

// BenchmarkEndpointTaskDeltaThenHandOver is the same for one task of a
// service coming and going, sent as that task's endpoint (what a manager
// sends an agent that asks for endpoint tasks).
func BenchmarkEndpointTaskDeltaThenHandOver(b *testing.B) {
	s := benchState(b)
	key := "default\x00svc-007\x00svc-007-extra"
	sets := []*legionpb.AssignmentSet{
		{Delta: true, EndpointTaskChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{
			key: mustJSON(b, endpoints.Task{Name: "svc-007-extra", IP: "10.200.255.2", Node: "node-000", Slot: 101})})}},
		{Delta: true, EndpointTaskChanges: &legionpb.Items{Removed: []string{key}}},
	}
	applyInTurn(b, s, sets, has200Services)
}

// BenchmarkMembersRollOver is a rolling update as an agent of a
// 20,000-task cluster follows it: each message replaces 50 policy
// members across the services (50 put under new names, 50 removed),
// and the agent takes a set after every message, or after every fourth
// when it is busy with the last one; the members' values as JSON or
// typed (AssignmentsRequest.typed_values). Reported per message.
func BenchmarkMembersRollOver(b *testing.B) {
	for _, values := range []string{"json", "typed"} {
		for _, every := range []int{1, 4} {
			b.Run(fmt.Sprintf("values=%s/handover-every=%d", values, every), func(b *testing.B) {
				benchMembersRollOver(b, values == "typed", every)
			})
		}
	}
}

func benchMembersRollOver(b *testing.B, typed bool, every int) {
	s := benchState(b)
	const perMessage = 50
	encode := func(m endpoints.Member) []byte { return mustJSON(b, m) }
	if typed {
		encode = func(m endpoints.Member) []byte { return endpoints.MemberWire(&m) }
	}
	var sets []*legionpb.AssignmentSet
	for m := range 400 { // 20,000 members replaced
		put, removed := map[string][]byte{}, []string(nil)
		for j := range perMessage {
			i := m*perMessage + j
			svc, r := i%200, i/200
			old := fmt.Sprintf("svc-%03d-%03d", svc, r)
			name := fmt.Sprintf("svc-%03d-%03d-v2", svc, r)
			put[itemKey("default", name)] = encode(endpoints.Member{Namespace: "default", Task: name,
				Service: fmt.Sprintf("svc-%03d", svc), IP: fmt.Sprintf("10.202.%d.%d", r, 2+svc), Node: "node-001"})
			removed = append(removed, itemKey("default", old))
		}
		sets = append(sets, &legionpb.AssignmentSet{Delta: true, TypedValues: typed,
			MemberChanges: &legionpb.Items{Put: legionpb.ItemsPut(put), Removed: removed}})
	}
	rollOver(b, s, sets, every, func(_ int, as agent.Assignments) error {
		if n := as.Policies.Members.Len(); n != 20000 {
			return fmt.Errorf("%d members handed over", n)
		}
		return nil
	})
}

// rollOver applies a rollout's sets in turn to s, from benchState again
// once all are applied, and hands the state over after every every-th,
// checking it with ok (told the set's index).
func rollOver(b *testing.B, s *state, sets []*legionpb.AssignmentSet, every int, ok func(int, agent.Assignments) error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(sets) == 0 && i > 0 {
			b.StopTimer()
			s = benchState(b)
			b.StartTimer()
		}
		if err := s.apply(sets[i%len(sets)]); err != nil {
			b.Fatal(err)
		}
		if (i+1)%every == 0 {
			if err := ok(i%len(sets), s.assignments()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkEndpointTasksRollOver is an agent of a 20,000-task cluster
// taking a rollout's endpoint tasks: each message replaces perService
// ready tasks of one service, new names among the old ones, and the set
// is handed over after each.
func BenchmarkEndpointTasksRollOver(b *testing.B) {
	for _, perService := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("tasks-per-message=%d", perService), func(b *testing.B) {
			s := benchState(b)
			var sets []*legionpb.AssignmentSet
			for m := range 20000 / perService {
				put, removed := map[string][]byte{}, []string(nil)
				for j := range perService {
					i := m*perService + j
					svc, r := i/100, i%100
					service := fmt.Sprintf("svc-%03d", svc)
					old := fmt.Sprintf("svc-%03d-%03d", svc, r)
					t := endpoints.Task{Name: old + "-v2", IP: fmt.Sprintf("10.202.%d.%d", r, 2+svc), Node: "node-001", Slot: r + 1}
					put[epKey(service, t.Name)] = endpoints.TaskWire(t)
					removed = append(removed, epKey(service, old))
				}
				sets = append(sets, &legionpb.AssignmentSet{Delta: true, TypedValues: true,
					EndpointTaskChanges: &legionpb.Items{Put: legionpb.ItemsPut(put), Removed: removed}})
			}
			rollOver(b, s, sets, 1, func(i int, as agent.Assignments) error {
				if n := len(as.Endpoints[i*perService/100].Tasks); n != 100 {
					return fmt.Errorf("%d tasks handed over", n)
				}
				return nil
			})
		})
	}
}

func epKey(service, task string) string { return "default\x00" + service + "\x00" + task }

// BenchmarkRolloutMessages is an agent of a 20,000-task cluster taking a
// rollout's messages as the scale run's update sends them: 51 new tasks
// ready, three in each of 17 services (their endpoint tasks put), then
// the 51 they replace gone (removed), the set handed over after each
// message. Their policy members come beside the endpoint tasks
// (members=apart, as managers send them now: the endpoint tasks stand for
// them), or with them (members=all, from a manager that sends every
// member), or beside them with the old tasks kept as members while they
// stop (members=kept: pf's soft drain, AssignmentSet.members_kept), and
// removed in a third message. Reported per message.
func BenchmarkRolloutMessages(b *testing.B) {
	for _, members := range []string{"apart", "all", "kept"} {
		b.Run("members="+members, func(b *testing.B) { benchRolloutMessages(b, members != "all", members == "kept") })
	}
}

func benchRolloutMessages(b *testing.B, apart, kept bool) {
	const perService, services = 3, 17
	var sets []*legionpb.AssignmentSet
	for m := 0; m < 33*200/services; m++ { // 33 batches of three of each service's 100
		put := &legionpb.AssignmentSet{Delta: true, TypedValues: true, MembersBesideEndpoints: apart, EndpointTaskChanges: &legionpb.Items{}}
		gone := &legionpb.AssignmentSet{Delta: true, TypedValues: true, MembersBesideEndpoints: apart, EndpointTaskChanges: &legionpb.Items{}}
		if !apart {
			put.MemberChanges, gone.MemberChanges = &legionpb.Items{}, &legionpb.Items{}
		}
		eps, members := map[string][]byte{}, map[string][]byte{}
		for j := range services {
			g := m*services + j
			svc, first := g%200, g/200*perService
			service := fmt.Sprintf("svc-%03d", svc)
			for r := first; r < first+perService; r++ {
				old := fmt.Sprintf("svc-%03d-%03d", svc, r)
				name := old + "-v2" // just after the old one
				ip := fmt.Sprintf("10.202.%d.%d", r, 2+svc)
				eps[epKey(service, name)] = endpoints.TaskWire(endpoints.Task{Name: name, IP: ip, Node: "node-001", Slot: r + 1})
				gone.EndpointTaskChanges.Removed = append(gone.EndpointTaskChanges.Removed, epKey(service, old))
				if kept {
					gone.MembersKept = append(gone.MembersKept, epKey(service, old))
				}
				if !apart {
					members[itemKey("default", name)] = endpoints.MemberWire(&endpoints.Member{Namespace: "default", Task: name, Service: service, IP: ip, Node: "node-001"})
					gone.MemberChanges.Removed = append(gone.MemberChanges.Removed, itemKey("default", old))
				}
			}
		}
		put.EndpointTaskChanges.Put = legionpb.ItemsPut(eps)
		if !apart {
			put.MemberChanges.Put = legionpb.ItemsPut(members)
		}
		sets = append(sets, put, gone)
		if kept {
			stopped := &legionpb.AssignmentSet{Delta: true, TypedValues: true, MembersBesideEndpoints: true, MemberChanges: &legionpb.Items{}}
			for _, k := range gone.MembersKept {
				svc, task, _ := taskKey(k)
				ns, _, _ := strings.Cut(svc, "\x00")
				stopped.MemberChanges.Removed = append(stopped.MemberChanges.Removed, itemKey(ns, task))
			}
			sets = append(sets, stopped)
		}
	}
	rollOver(b, benchState(b), sets, 1, func(_ int, as agent.Assignments) error {
		if n := as.Policies.Members.Len(); n != 20000 && n != 20000+perService*services {
			return fmt.Errorf("%d members handed over", n)
		}
		return nil
	})
}

// BenchmarkDecodeSharedChanges decodes one delta of a rollout as the
// agent receives it (80 endpoint tasks and their members, typed): with
// the changes every node is sent alike in AssignmentSet.shared, as
// managers sent them before (a copy out of the message, then a second
// decode), and appended to the message, as they send them now.
func BenchmarkDecodeSharedChanges(b *testing.B) {
	sh := &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{}, MemberChanges: &legionpb.Items{}}
	for i := range 80 {
		svc, name := fmt.Sprintf("svc-%03d", i/50), fmt.Sprintf("svc-%03d-%03d", i/50, i)
		ip := fmt.Sprintf("10.202.%d.%d", i, 2+i/50)
		sh.EndpointTaskChanges.Put = append(sh.EndpointTaskChanges.Put,
			&legionpb.Item{Key: epKey(svc, name), Value: endpoints.TaskWire(endpoints.Task{Name: name, IP: ip, Node: "node-001", Slot: i + 1})})
		sh.MemberChanges.Put = append(sh.MemberChanges.Put, &legionpb.Item{Key: itemKey("default", name),
			Value: endpoints.MemberWire(&endpoints.Member{Namespace: "default", Task: name, Service: svc, IP: ip, Node: "node-001"})})
	}
	wire, err := proto.Marshal(sh)
	if err != nil {
		b.Fatal(err)
	}
	apart, err := proto.Marshal(&legionpb.AssignmentSet{Delta: true, Version: 7, TypedValues: true, Shared: wire})
	if err != nil {
		b.Fatal(err)
	}
	in := &legionpb.AssignmentSet{Delta: true, Version: 7, TypedValues: true}
	in.ProtoReflect().SetUnknown(wire)
	appended, err := proto.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		msg  []byte
	}{{"in-shared", apart}, {"appended", appended}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.msg)))
			for b.Loop() {
				var set legionpb.AssignmentSet
				if err := proto.Unmarshal(c.msg, &set); err != nil {
					b.Fatal(err)
				}
				if shared := set.GetShared(); len(shared) > 0 {
					if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(shared, &set); err != nil {
						b.Fatal(err)
					}
				}
				if len(set.GetMemberChanges().GetPut()) != 80 {
					b.Fatalf("%d members decoded", len(set.GetMemberChanges().GetPut()))
				}
			}
		})
	}
}
