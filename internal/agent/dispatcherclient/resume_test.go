package dispatcherclient_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
)

// When its manager dies, a session's stream goes on with the next from
// where the node's state was: no whole set again (a cluster's every
// endpoint and policy member, megabytes at 20,000 tasks), only what
// changed, and the state the agent is handed equals a fresh session's.
func TestSessionResumesWithTheNextManager(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	// Two managers over one replica, each with its own cache of it.
	l1, l2 := dispatchertest.Listen(t), dispatchertest.Listen(t)
	a1, a2 := l1.Addr().String(), l2.Addr().String()
	// The cluster names the second manager only once the stream is on the
	// first, so that the stream starts there.
	var pmu sync.Mutex
	named := []string{a1}
	peers := func() (string, []string) {
		pmu.Lock()
		defer pmu.Unlock()
		return a1, named
	}
	m1 := dispatchertest.Serve(t, ca, st, l1, peers)
	dispatchertest.Serve(t, ca, st, l2, peers)
	// The second manager serves another node meanwhile, so its cache
	// follows the replica: one cannot tell what changed before it
	// started (a test manager starts it at its first stream, a server
	// when its store opens).
	untilState(t, startFollowing(ctxT(t), t, newSession(t, ca, "node-b", a2)), nodeState{Values: map[string]string{}})
	api := &legion.Service{Header: header(legion.KindService, "web", "api")}
	api.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/api:1"}}
	put(t, st, api)
	put(t, st, secret("token", "s3cret"))
	put(t, st, task("a-1", "node-a", "token"))
	put(t, st, apiTask("api-1-1", "node-b", "10.0.1.2"))

	var mu sync.Mutex
	var wholes, deltas int
	var wholeParts []string
	cfg := sessionConfig(t, ca, "node-a", a1)
	cfg.OnAssignments = func(m dispatcherclient.Message) {
		mu.Lock()
		defer mu.Unlock()
		if m.Delta {
			deltas++
		} else {
			wholes++
		}
		for _, p := range m.Whole {
			wholeParts = append(wholeParts, p.Name)
		}
	}
	ctx := ctxT(t)
	s := openSession(t, cfg)
	ch := startFollowing(ctx, t, s)
	// A change after the whole set: the point the node is at is then one
	// of the cluster's history (a set made of the cache's first reading
	// names none).
	put(t, st, apiTask("api-1-2", "node-b", "10.0.1.3"))
	untilState(t, ch, nodeState{Tasks: []string{"a-1@node-a"}, Values: map[string]string{"Secret/web/token": "s3cret"},
		Endpoints: []string{"web/api: api-1-1 10.0.1.2, api-1-2 10.0.1.3"}, Members: []string{"api-1-1", "api-1-2"}})

	pmu.Lock()
	named = []string{a1, a2}
	pmu.Unlock()
	dispatchertest.Poll(t, "the session to learn of the second manager", 15*time.Second, func() bool {
		return slices.Contains(s.Managers(), a2)
	})
	m1.Stop() // the stream's manager: the next stream is the second's
	if _, err := st.Delete(context.Background(), legion.KindTask, "web", "a-1", store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	put(t, st, task("a-2", "node-a", "token"))
	put(t, st, secret("token", "rotated"))
	put(t, st, apiTask("api-1-3", "node-b", "10.0.1.4"))
	want := nodeState{Tasks: []string{"a-2@node-a"}, Values: map[string]string{"Secret/web/token": "rotated"},
		Endpoints: []string{"web/api: api-1-1 10.0.1.2, api-1-2 10.0.1.3, api-1-3 10.0.1.4"}, Members: []string{"api-1-1", "api-1-2", "api-1-3"}}
	untilState(t, ch, want)
	mu.Lock()
	w, d, parts := wholes, deltas, wholeParts
	mu.Unlock()
	if w != 1 || d == 0 {
		t.Fatalf("%d whole sets and %d deltas: want the first set alone whole, the second manager's changes only", w, d)
	}
	// Values and volumes, worked out per node, come whole to a resumed
	// stream; the rest (the cluster's endpoints and members) as changes.
	if slices.ContainsFunc(parts, func(p string) bool { return p != "value" && p != "volume" }) {
		t.Fatalf("the deltas carried these parts whole: %q; want changes only but for the node's values and volumes", parts)
	}
	// What a fresh session is sent whole is what the resumed one holds.
	cfg.Managers, cfg.OnAssignments = []string{a2}, nil
	untilState(t, startFollowing(ctx, t, openSession(t, cfg)), want)
}

// apiTask is a ready task of service web/api at ip.
func apiTask(name, node, ip string) *legion.Task {
	t := task(name, node, "")
	t.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "api"}
	t.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: ip}
	return t
}

// nodeState is what an agent is handed, in short: its tasks and values,
// every service's ready tasks, and the policy members.
type nodeState struct {
	Tasks     []string
	Values    map[string]string
	Endpoints []string // namespace/service: task ip, ...
	Members   []string
}

func stateOf(as agent.Assignments) nodeState {
	sum := summarize(as)
	s := nodeState{Tasks: sum.Tasks, Values: sum.Values}
	for _, e := range as.Endpoints {
		line := e.Namespace + "/" + e.Name + ":"
		for i, t := range e.Tasks {
			if i > 0 {
				line += ","
			}
			line += " " + t.Name + " " + t.IP
		}
		s.Endpoints = append(s.Endpoints, line)
	}
	if as.Policies != nil {
		for m := range as.Policies.Members.All() {
			s.Members = append(s.Members, m.Task)
		}
	}
	slices.Sort(s.Members)
	return s
}

// untilState reads sets until one is want, failing after the deadline.
func untilState(t *testing.T, ch <-chan agent.Assignments, want nodeState) {
	t.Helper()
	untilSeen(t, ch, want, stateOf)
}
