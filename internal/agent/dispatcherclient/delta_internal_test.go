package dispatcherclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testpoll"
	"google.golang.org/protobuf/proto"
)

// latest keeps the last assignments a stream gave, with the version of
// the message they came from.
type latest struct {
	mu  sync.Mutex
	as  agent.Assignments
	at  uint64
	n   int // messages
	err error
	// shared counts the messages carrying the shared changes encoded
	// apart (AssignmentSet.shared); beside those whose members leave out
	// the endpoint tasks (AssignmentSet.members_beside_endpoints); kept
	// the members named by endpoint task (AssignmentSet.members_kept).
	shared, beside, kept int
	// before: the stream's changes are taken as a manager from before
	// sent them, in AssignmentSet.shared (managers now append them to the
	// message, where they decode as its own fields).
	before bool
}

func (l *latest) set(as agent.Assignments, at uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.err = err
		return
	}
	l.as, l.at = as, max(l.at, at)
	l.n++
}

func (l *latest) sharedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared
}

func (l *latest) besideCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.beside
}

func (l *latest) keptCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept
}

func (l *latest) get() (agent.Assignments, uint64, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.as, l.at, l.n, l.err
}

// follow reads a raw stream until it ends: whole sets decoded, changes
// applied to the state the first whole set started.
func follow(ctx context.Context, t *testing.T, c legionpb.DispatcherClient, req *legionpb.AssignmentsRequest, l *latest, sizes *[]int) {
	t.Helper()
	s, err := c.Assignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var cur *state
		for {
			set, err := s.Recv()
			if err != nil {
				if ctx.Err() == nil {
					l.set(agent.Assignments{}, 0, err)
				}
				return
			}
			var as agent.Assignments
			if len(set.GetShared()) > 0 {
				err = fmt.Errorf("message %d: the shared changes came in AssignmentSet.shared, not in the message", l.n)
			} else if l.before && set.GetDelta() {
				err = sharedAsBefore(set)
			}
			if set.GetMembersBesideEndpoints() {
				l.mu.Lock()
				l.beside++
				l.mu.Unlock()
			}
			if n := len(set.GetMembersKept()); n > 0 {
				l.mu.Lock()
				l.kept += n
				l.mu.Unlock()
			}
			if len(set.GetShared()) > 0 {
				l.mu.Lock()
				l.shared++
				l.mu.Unlock()
				if set.EndpointChanges != nil || set.EndpointServiceChanges != nil || set.EndpointTaskChanges != nil ||
					set.PeerChanges != nil || set.RouteChanges != nil || set.MemberChanges != nil {
					err = fmt.Errorf("message %d carries shared changes both encoded apart and in their fields", l.n)
				}
			}
			switch {
			case err != nil:
			case !set.GetDelta():
				if as, err = decode(set); err == nil {
					cur = stateOf(as)
				}
			case cur == nil:
				err = fmt.Errorf("changes before a whole set")
			default:
				if err = cur.apply(set); err == nil {
					as = cur.assignments()
				}
			}
			if sizes != nil {
				l.mu.Lock()
				if set.GetDelta() != (len(*sizes) > 0) {
					err = fmt.Errorf("message %d of a delta stream: delta=%v", len(*sizes), set.GetDelta())
				}
				*sizes = append(*sizes, proto.Size(set))
				l.mu.Unlock()
			}
			l.set(as, set.GetVersion(), err)
		}
	}()
}

// sharedAsBefore moves the changes every node is sent alike (fields 13 to
// 15 and 17 to 19) into AssignmentSet.shared, as a manager from before
// sent them.
func sharedAsBefore(set *legionpb.AssignmentSet) error {
	sh := &legionpb.AssignmentSet{EndpointChanges: set.EndpointChanges, PeerChanges: set.PeerChanges, RouteChanges: set.RouteChanges,
		MemberChanges: set.MemberChanges, EndpointServiceChanges: set.EndpointServiceChanges, EndpointTaskChanges: set.EndpointTaskChanges}
	if proto.Size(sh) == 0 {
		return nil
	}
	data, err := proto.Marshal(sh)
	if err != nil {
		return err
	}
	set.EndpointChanges, set.PeerChanges, set.RouteChanges, set.MemberChanges, set.EndpointServiceChanges, set.EndpointTaskChanges =
		nil, nil, nil, nil, nil, nil
	set.Shared = data
	return nil
}

// dialAs is a Dispatcher client of m with node's worker certificate.
func dialAs(t *testing.T, m *dispatchertest.Manager, node string) legionpb.DispatcherClient {
	t.Helper()
	creds := dispatchertest.Credentials(t, m.CA, node, pki.RoleWorker)
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return legionpb.NewDispatcherClient(conn)
}

// wholeNow is the first set of a new stream, decoded.
func wholeNow(ctx context.Context, t *testing.T, c legionpb.DispatcherClient) agent.Assignments {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Assignments(sctx, &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if set.GetDelta() {
		t.Fatal("the first message of a stream is a delta")
	}
	as, err := decode(set)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// TestDeltasEndWhereWholeSetsDo follows one node's assignments as changes
// applied to a first whole set, through random sequences of writes to
// everything a set is made of, and checks after each sequence that the
// agent holds what the whole set of a stream opened then gives it: with
// endpoints sent as changes per task, and as whole services (what an
// agent that predates endpoint tasks asks for); with every member sent,
// and only those beside the endpoint tasks.
func TestDeltasEndWhereWholeSetsDo(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("LEGION_DELTA_SEED"), 10, 64); err == nil {
		seed = v // to replay a failure
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c := dialAs(t, m, "node-a")

	var delta, byService, shared, sharedByService, beside, besideWired, besideByService, kept, keptWired latest
	var sizes []int
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true}, &delta, &sizes)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true}, &byService, nil)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, SharedChanges: true}, &shared, nil)
	sharedByService.before = true // and taken as from a manager from before
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, SharedChanges: true}, &sharedByService, nil)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, MembersBesideEndpoints: true}, &beside, nil)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, SharedChanges: true, TypedValues: true,
		MembersBesideEndpoints: true}, &besideWired, nil)
	// Beside the endpoint tasks only when they come apart: asked alone,
	// every member comes.
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, MembersBesideEndpoints: true}, &besideByService, nil)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, MembersBesideEndpoints: true, MembersKept: true}, &kept, nil)
	follow(ctx, t, c, &legionpb.AssignmentsRequest{Deltas: true, EndpointTasks: true, SharedChanges: true, TypedValues: true,
		MembersBesideEndpoints: true, MembersKept: true}, &keptWired, nil)
	streams := []*latest{&delta, &byService, &shared, &sharedByService, &beside, &besideWired, &besideByService, &kept, &keptWired}

	var last uint64
	w := func(o legion.Object, del bool) {
		t.Helper()
		md := o.GetMetadata()
		if del {
			if _, err := m.Store.Delete(ctx, o.GetKind(), md.Namespace, md.Name, store.Precondition{}); err == nil {
				v, _ := m.Store.Version()
				last = v
			}
			return
		}
		got, _, err := m.Store.Put(ctx, o, store.WriteOptions{})
		if err != nil {
			t.Fatalf("writing %s %s: %v", o.GetKind(), md.Name, err)
		}
		last = max(last, got.GetMetadata().Version)
	}
	// A task of the node uses the marker, written last in each round: both
	// streams send at its version at least.
	marker := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Namespace: "web", Name: "marked"}}}
	marker.Spec.Node, marker.Spec.DesiredState = "node-a", legion.TaskRunning
	marker.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1", Configs: []legion.FileRef{{Name: "marker"}}}}
	w(marker, false)
	// The last two rounds: a ready task of a service, then the same task
	// told to stop while it runs, which leaves the endpoints and stays a
	// member (kept).
	drained := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Namespace: "shop", Name: "drained-1"}}}
	drained.Spec.Node, drained.Spec.DesiredState = "node-b", legion.TaskRunning
	drained.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "drained"}
	drained.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1"}}
	drained.Status.State, drained.Status.Ready, drained.Status.IP = legion.TaskRunning, true, "10.200.9.9"
	for round := range 14 {
		switch round {
		case 12:
			svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
				Metadata: legion.Metadata{Namespace: "shop", Name: "drained"}}}
			svc.Status.VIP = "10.201.9.9"
			w(svc, false)
			w(drained, false)
		case 13:
			drained.Spec.DesiredState = legion.TaskShutdown
			w(drained, false)
		default:
			for range 1 + rng.IntN(15) {
				randomWrite(rng, w)
			}
		}
		cfg := &legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
			Metadata: legion.Metadata{Namespace: "web", Name: "marker"}}}
		cfg.Spec.Data = []byte(fmt.Sprint(round))
		w(cfg, false)
		// A stream opened now starts with the whole set of this moment.
		want := wholeNow(ctx, t, c)
		var why string
		t.Cleanup(func() {
			if t.Failed() && why != "" {
				t.Logf("round %d: %s", round, why)
			}
		})
		testpoll.Until(t, fmt.Sprintf("round %d: the delta streams at the whole set of version %d", round, last), 20*time.Second, 10*time.Millisecond, func() bool {
			for _, l := range streams {
				da, _, _, derr := l.get()
				if derr != nil {
					t.Fatalf("delta stream failed: %v", derr)
				}
				if why = cmp.Diff(want, da); why != "" {
					return false
				}
			}
			return true
		})
		t.Logf("round %d: equal at version %d", round, last)
	}
	_, _, n, _ := delta.get()
	if n < 2 || len(sizes) < 2 {
		t.Fatalf("the delta stream sent %d messages: too few to show changes", n)
	}
	// The shared changes come in the message (follow fails a stream sent
	// AssignmentSet.shared); taken from there as from a manager from
	// before, the deltas end where whole sets do as well.
	if a, b, c, d := delta.sharedCount(), byService.sharedCount(), shared.sharedCount(), sharedByService.sharedCount(); a != 0 || b != 0 || c != 0 || d == 0 {
		t.Fatalf("messages with the shared changes in AssignmentSet.shared: %d and %d on the streams that did not ask, %d on one that did, %d taken as from a manager from before", a, b, c, d)
	}
	if a, b, c, d := delta.besideCount(), besideByService.besideCount(), beside.besideCount(), besideWired.besideCount(); a != 0 || b != 0 || c == 0 || d == 0 {
		t.Fatalf("deltas with members beside the endpoint tasks: %d on a stream that did not ask, %d on one that asked without endpoint tasks, %d and %d on those that asked with them", a, b, c, d)
	}
	// A ready task leaving its endpoints while it runs was named as kept
	// on the streams that asked, and only there.
	if a, b, c := beside.keptCount(), kept.keptCount(), keptWired.keptCount(); a != 0 || b == 0 || c == 0 {
		t.Fatalf("members kept: %d on a stream that did not ask, %d and %d on those that did", a, b, c)
	}
}

// randomWrite writes or deletes one random object of the kinds a set is
// made of: tasks of the node and of another (running, ready, with
// secrets and configs, owned by services), services, secrets, configs,
// nodes, routes, namespaces, network policies and volumes.
func randomWrite(rng *rand.Rand, w func(legion.Object, bool)) {
	pick := func(n int) int { return rng.IntN(n) }
	ns := []string{"web", "shop"}[pick(2)]
	del := pick(5) == 0
	h := func(k legion.Kind, ns, name string) legion.Header {
		return legion.Header{APIVersion: legion.APIVersion, Kind: k, Metadata: legion.Metadata{Name: name, Namespace: ns}}
	}
	switch pick(9) {
	case 0, 1, 2:
		// A task keeps its service and address mostly, as a real one
		// does, so a ready task leaving its endpoints while it runs
		// (members_kept) comes often; now and then they change.
		i := pick(8)
		t := &legion.Task{Header: h(legion.KindTask, ns, fmt.Sprintf("t-%d", i))}
		t.Spec.Node = []string{"node-a", "node-a", "node-b"}[pick(3)]
		t.Spec.DesiredState = []legion.TaskState{legion.TaskRunning, legion.TaskShutdown}[pick(2)]
		t.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: fmt.Sprintf("s-%d", i%3)}
		if pick(4) == 0 {
			t.Spec.Owner.Name = fmt.Sprintf("s-%d", pick(3))
		}
		t.Spec.Slot = pick(4)
		cont := legion.Container{Name: "app", Image: "example/app:1"}
		if pick(2) == 0 {
			cont.Secrets = []legion.FileRef{{Name: fmt.Sprintf("sec-%d", pick(3))}}
		}
		if pick(2) == 0 {
			cont.Env = []legion.EnvVar{{Name: "X", Config: fmt.Sprintf("cfg-%d", pick(3))}}
		}
		t.Spec.Pod.Containers = []legion.Container{cont}
		if pick(3) > 0 {
			t.Spec.Volumes = map[string]string{"data": fmt.Sprintf("v-%d", pick(3))}
		}
		t.Status.State = []legion.TaskState{legion.TaskRunning, legion.TaskStarting}[pick(2)]
		t.Status.Ready = pick(2) == 0
		if pick(4) > 0 {
			t.Status.IP = fmt.Sprintf("10.200.0.%d", 2+i)
			if pick(4) == 0 {
				t.Status.IP = fmt.Sprintf("10.200.0.%d", 2+pick(50))
			}
		}
		w(t, del)
	case 3:
		s := &legion.Service{Header: h(legion.KindService, ns, fmt.Sprintf("s-%d", pick(3)))}
		s.Status.VIP = fmt.Sprintf("10.201.0.%d", 1+pick(9))
		s.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 8000 + pick(3)}}}
		w(s, del)
	case 4:
		if pick(2) == 0 {
			s := &legion.Secret{Header: h(legion.KindSecret, ns, fmt.Sprintf("sec-%d", pick(3)))}
			s.Spec.Data = []byte(fmt.Sprintf("value %d", pick(100)))
			w(s, del)
		} else {
			c := &legion.Config{Header: h(legion.KindConfig, ns, fmt.Sprintf("cfg-%d", pick(3)))}
			c.Spec.Data = []byte(fmt.Sprintf("value %d", pick(100)))
			w(c, del)
		}
	case 5:
		n := &legion.Node{Header: h(legion.KindNode, "", []string{"node-a", "node-b", "node-c"}[pick(3)])}
		n.Status.PodCIDR = fmt.Sprintf("10.200.%d.0/24", pick(3))
		n.Status.Addr = "192.0.2.1"
		n.Status.WireGuard = &legion.WireGuard{PublicKey: fmt.Sprintf("key-%d", pick(5))}
		if pick(2) == 0 {
			n.Metadata.Labels = map[string]string{"legion.ingress": "true"}
		}
		w(n, del)
	case 6:
		r := &legion.Route{Header: h(legion.KindRoute, ns, fmt.Sprintf("r-%d", pick(3)))}
		r.Spec = legion.RouteSpec{Host: fmt.Sprintf("h%d.example", pick(3)), Service: fmt.Sprintf("s-%d", pick(3))}
		if pick(2) == 0 {
			r.Spec.TLS = &legion.RouteTLS{Secret: fmt.Sprintf("sec-%d", pick(3))}
		}
		w(r, del)
	case 7:
		n := &legion.Namespace{Header: h(legion.KindNamespace, "", ns)}
		n.Spec.Isolation = []legion.Isolation{legion.IsolationNamespace, legion.IsolationOpen}[pick(2)]
		w(n, del)
		p := &legion.NetworkPolicy{Header: h(legion.KindNetworkPolicy, ns, fmt.Sprintf("p-%d", pick(2)))}
		w(p, pick(2) == 0)
	case 8:
		v := &legion.Volume{Header: h(legion.KindVolume, ns, fmt.Sprintf("v-%d", pick(3))), Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30}}
		v.Status.Node = []string{"", "node-a", "node-b"}[pick(3)]
		w(v, del)
	}
}

// Items put by a manager from before come in a map's order, and a list
// may name a key twice: the agent takes them in key order, the later
// entry of a key counting, as reading them into a map did.
func TestItemsPutInAnyOrder(t *testing.T) {
	it := &legionpb.Items{Put: []*legionpb.Item{{Key: "b", Value: []byte("1")}, {Key: "a", Value: []byte("2")},
		{Key: "c", Value: []byte("3")}, {Key: "a", Value: []byte("4")}}}
	keys, vals, err := decodeItems(it, "item", decodeJSON[int])
	if err != nil || !slices.Equal(keys, []string{"a", "b", "c"}) || !slices.Equal(vals, []int{4, 1, 3}) {
		t.Fatalf("decoded %v %v (%v), want a b c as 4 1 3", keys, vals, err)
	}
	if got := it.GetPut(); got[0].GetKey() != "b" || got[3].GetKey() != "a" {
		t.Fatal("the message's entries were reordered in place")
	}
	sorted := &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"x": []byte("1"), "y": []byte("2")})}
	if got := inKeyOrder(sorted.GetPut()); &got[0] != &sorted.Put[0] {
		t.Fatal("entries already in key order were copied")
	}
}
