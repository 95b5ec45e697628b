package dispatcherclient

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// endpointsJSON is a whole set's endpoints field for services.
func endpointsJSON(t *testing.T, services ...endpoints.Service) []byte {
	t.Helper()
	data, err := json.Marshal(services)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func itemJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// deepCopy is what a list holds now, to see later that nobody wrote it.
func deepCopy(t *testing.T, l []*endpoints.Service) []*endpoints.Service {
	t.Helper()
	var out []*endpoints.Service
	if err := json.Unmarshal(itemJSON(t, l), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Endpoints sent as changes per task (a service's header and each ready
// task apart) fold into the same services a whole set gives: a task
// added, changed and removed, a service's header changed, a service
// removed with its tasks, a new one; the lists handed over before a
// change stay as they were.
func TestEndpointTasksFoldIntoServices(t *testing.T) {
	t.Parallel()
	task := func(name, ip string) *endpoints.Task {
		return &endpoints.Task{Name: name, IP: ip, Node: "n1", Slot: 1}
	}
	web := endpoints.Service{Namespace: "shop", Name: "web", VIP: "10.201.0.1", Ports: []endpoints.Port{{Protocol: "tcp", Port: 80, TargetPort: 8080}},
		Tasks: []*endpoints.Task{task("web-1", "10.200.0.1"), task("web-3", "10.200.0.3"), task("web-5", "10.200.0.5")}}
	idle := endpoints.Service{Namespace: "shop", Name: "idle", VIP: "10.201.0.2"}
	db := endpoints.Service{Namespace: "vault", Name: "db", DNSRR: true, Stateful: true, Tasks: []*endpoints.Task{task("db-0", "10.200.1.1"), task("db-1", "10.200.1.2")}}
	first, err := decode(&legionpb.AssignmentSet{Endpoints: endpointsJSON(t, idle, web, db)})
	if err != nil {
		t.Fatal(err)
	}
	s := stateOf(first)
	// step applies one message and checks the services handed over
	// against the whole set of want, and that the list handed over
	// before is untouched.
	var before, beforeCopy []*endpoints.Service
	step := func(what string, set *legionpb.AssignmentSet, want ...endpoints.Service) {
		t.Helper()
		set.Delta = true
		if err := s.apply(set); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		whole, err := decode(&legionpb.AssignmentSet{Endpoints: endpointsJSON(t, want...)})
		if err != nil {
			t.Fatal(err)
		}
		got := s.assignments().Endpoints
		if diff := cmp.Diff(whole.Endpoints, got); diff != "" {
			t.Fatalf("%s: services (-whole set +folded):\n%s", what, diff)
		}
		// A whole set of the same content starts the same state.
		if diff := cmp.Diff(stateOf(whole).assignments(), s.assignments()); diff != "" {
			t.Fatalf("%s: a whole set's state and the folded one differ (-whole +folded):\n%s", what, diff)
		}
		if diff := cmp.Diff(beforeCopy, before); diff != "" {
			t.Fatalf("%s: the list handed over before the change was written (-then +now):\n%s", what, diff)
		}
		before, beforeCopy = got, deepCopy(t, got)
	}
	before = s.assignments().Endpoints
	beforeCopy = deepCopy(t, before)

	web.Tasks = []*endpoints.Task{task("web-1", "10.200.0.1"), task("web-2", "10.200.0.2"), task("web-3", "10.200.0.3"), task("web-5", "10.200.0.5")}
	handed := before
	step("web-2 ready", &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{
		"shop\x00web\x00web-2": itemJSON(t, task("web-2", "10.200.0.2"))})}}, idle, web, db)
	// A task change makes its service again and hands the others over as
	// they were.
	for i, svc := range before {
		if changed := svc.Name == "web"; (svc == handed[i]) == changed {
			t.Fatalf("after web-2 ready, service %s handed over anew: %v, want %v", svc.Name, svc != handed[i], changed)
		}
	}

	web.Tasks = []*endpoints.Task{task("web-1", "10.200.0.1"), task("web-2", "10.200.0.2"), task("web-3", "10.200.9.3")}
	step("web-3 moved, web-5 not ready", &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{
		Put:     legionpb.ItemsPut(map[string][]byte{"shop\x00web\x00web-3": itemJSON(t, task("web-3", "10.200.9.3"))}),
		Removed: []string{"shop\x00web\x00web-5"}}}, idle, web, db)

	head := web
	head.Tasks, head.VIP = nil, "10.201.0.9"
	web.VIP = "10.201.0.9"
	idle.Tasks = []*endpoints.Task{task("idle-1", "10.200.3.1")}
	step("web's VIP changed, idle's first task", &legionpb.AssignmentSet{
		EndpointServiceChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"shop\x00web": itemJSON(t, head)})},
		EndpointTaskChanges:    &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"shop\x00idle\x00idle-1": itemJSON(t, task("idle-1", "10.200.3.1"))})}},
		idle, web, db)

	step("db removed with its tasks", &legionpb.AssignmentSet{
		EndpointServiceChanges: &legionpb.Items{Removed: []string{"vault\x00db"}},
		EndpointTaskChanges:    &legionpb.Items{Removed: []string{"vault\x00db\x00db-0", "vault\x00db\x00db-1"}}}, idle, web)

	// A service removed takes its tasks even if the manager names none.
	step("idle removed, its tasks not named", &legionpb.AssignmentSet{
		EndpointServiceChanges: &legionpb.Items{Removed: []string{"shop\x00idle"}}}, web)
	idle.Tasks = nil
	step("idle back, without tasks", &legionpb.AssignmentSet{
		EndpointServiceChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"shop\x00idle": itemJSON(t, idle)})}}, idle, web)

	api := endpoints.Service{Namespace: "shop", Name: "api", VIP: "10.201.0.3", Tasks: []*endpoints.Task{task("api-1", "10.200.4.1")}}
	apiHead := api
	apiHead.Tasks = nil
	step("api new", &legionpb.AssignmentSet{
		EndpointServiceChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"shop\x00api": itemJSON(t, apiHead)})},
		EndpointTaskChanges:    &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"shop\x00api\x00api-1": itemJSON(t, task("api-1", "10.200.4.1"))})}},
		api, idle, web)

	// A rollout's message: many tasks of one service at once, put and
	// then removed, more than one each (merged in one pass).
	rollout := map[string][]byte{"shop\x00web\x00web-1": itemJSON(t, task("web-1", "10.200.8.1"))}
	var gone []string
	web.Tasks = []*endpoints.Task{task("web-1", "10.200.8.1")}
	for i := 10; i < 22; i++ {
		name := fmt.Sprintf("web-%d", i)
		rollout["shop\x00web\x00"+name] = itemJSON(t, task(name, fmt.Sprintf("10.200.8.%d", i)))
		web.Tasks = append(web.Tasks, task(name, fmt.Sprintf("10.200.8.%d", i)))
		if i < 20 {
			gone = append(gone, "shop\x00web\x00"+name)
		}
	}
	web.Tasks = append(web.Tasks, task("web-2", "10.200.0.2"), task("web-3", "10.200.9.3"))
	slices.SortFunc(web.Tasks, func(a, b *endpoints.Task) int { return strings.Compare(a.Name, b.Name) }) // a whole set's order
	step("a rollout's tasks of web", &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{Put: legionpb.ItemsPut(rollout)}}, api, idle, web)
	gone = append(gone, "shop\x00web\x00web-2", "shop\x00web\x00web-3")
	web.Tasks = []*endpoints.Task{task("web-1", "10.200.8.1"), task("web-20", "10.200.8.20"), task("web-21", "10.200.8.21")}
	step("a rollout's old tasks of web gone", &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{Removed: gone}}, api, idle, web)

	// A manager that sends whole services (it predates endpoint tasks):
	// a service put replaces its tasks, none included meaning none.
	web.Tasks = []*endpoints.Task{task("web-7", "10.200.0.7")}
	api.Tasks = nil
	step("whole services", &legionpb.AssignmentSet{EndpointChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{
		"shop\x00web": itemJSON(t, web), "shop\x00api": itemJSON(t, api)})}}, api, idle, web)

	// The tasks part sent whole (a stream behind the manager's log).
	web.Tasks = []*endpoints.Task{task("web-8", "10.200.0.8")}
	step("every task again", &legionpb.AssignmentSet{EndpointTaskChanges: &legionpb.Items{Replace: true, Put: legionpb.ItemsPut(map[string][]byte{
		"shop\x00web\x00web-8": itemJSON(t, task("web-8", "10.200.0.8"))})}}, api, idle, web)

	if err := s.apply(&legionpb.AssignmentSet{Delta: true, Version: 7, EndpointTaskChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{
		"shop\x00web\x00web-9": []byte(`{"name":`)})}}); err == nil {
		t.Fatal("a broken endpoint task was taken")
	}
}

// The keyed parts keep their keys in order through any sequence of puts
// and removals, one at a time or many in a message, and a list handed
// over is never written afterwards.
func TestKeyedKeepsOrderAndHandedListsAlone(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	k := newKeyed[int]()
	model := map[string]int{}
	type handed struct{ list, copy []int }
	var lists []handed
	for i := range 5000 {
		key := fmt.Sprintf("k%03d", rng.IntN(300))
		switch rng.IntN(6) {
		case 0, 1, 2:
			k.set(key, i)
			model[key] = i
		case 3:
			_, had := model[key]
			if k.remove(key) != had {
				t.Fatalf("remove %s: reported %v, held %v", key, !had, had)
			}
			delete(model, key)
		case 4:
			l := k.list()
			lists = append(lists, handed{l, slices.Clone(l)})
		case 5:
			it := &legionpb.Items{Replace: rng.IntN(20) == 0}
			put := map[string][]byte{}
			if it.Replace {
				clear(model)
			}
			// Keys may be put and removed in one message (removed it is),
			// and removed twice.
			for range rng.IntN(40) {
				key := fmt.Sprintf("k%03d", rng.IntN(300))
				if rng.IntN(2) == 0 {
					put[key] = []byte(strconv.Itoa(i))
				} else {
					it.Removed = append(it.Removed, key)
				}
			}
			for key := range put {
				model[key] = i
			}
			for _, key := range it.Removed {
				delete(model, key)
			}
			it.Put = legionpb.ItemsPut(put)
			if rng.IntN(2) == 0 {
				// In a map's order, as a manager from before sends them.
				rng.Shuffle(len(it.Put), func(a, b int) { it.Put[a], it.Put[b] = it.Put[b], it.Put[a] })
			}
			if err := k.apply(it, "item", decodeJSON[int]); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(50) == 0 {
			var want []int
			for _, key := range slices.Sorted(maps.Keys(model)) {
				want = append(want, model[key])
			}
			if diff := cmp.Diff(want, k.list()); diff != "" {
				t.Fatalf("after %d operations (-model +keyed):\n%s", i, diff)
			}
			for _, key := range slices.Collect(maps.Keys(model)) {
				if v, ok := k.get(key); !ok || v != model[key] {
					t.Fatalf("get %s: %d %v, want %d", key, v, ok, model[key])
				}
			}
		}
	}
	for i, h := range lists {
		if !slices.Equal(h.list, h.copy) {
			t.Fatalf("list %d was written after it was handed over", i)
		}
	}
	// A whole set's items taken in any order end in key order.
	var as agent.Assignments
	as.Policies = &endpoints.Policies{}
	var members []*endpoints.Member
	for _, i := range rng.Perm(100) {
		members = append(members, &endpoints.Member{Namespace: "ns", Task: fmt.Sprintf("t%03d", i)})
	}
	as.Policies.Members = endpoints.MembersOf(members)
	got := stateOf(as).assignments().Policies.Members.Slice()
	if !slices.IsSortedFunc(got, func(a, b *endpoints.Member) int { return strings.Compare(a.Task, b.Task) }) || len(got) != 100 {
		t.Fatalf("members not in key order: %v", got)
	}
}
