package dispatcher_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
)

// A stream that says where its node's state is goes on from there, on
// another manager over another replica: its first message is what
// changed since (the node's values whole, as that manager cannot know
// which the node holds), and the state it leaves equals a whole set. A
// point the manager cannot vouch for (another term, a version from
// before its cache read the store) gets a whole set.
func TestStreamsResumeWhereAnotherEnded(t *testing.T) {
	t.Parallel()
	ca := dispatchertest.NewCA(t)
	lst, fst := dispatchertest.OpenPair(t)
	a := dispatchertest.Serve(t, ca, lst, nil, nil)
	b := dispatchertest.Serve(t, ca, fst, nil, nil)
	for _, o := range []legion.Object{secret("web", "token", "s3cret"), task("web", "a-1", "node-a", "token", "", ""),
		task("web", "b-1", "node-b", "", "", "")} {
		put(t, lst, o)
	}
	open := func(m *dispatchertest.Manager, version, term uint64) grpc.ServerStreamingClient[legionpb.AssignmentSet] {
		t.Helper()
		s, err := dial(t, m, "node-a", pki.RoleWorker).Assignments(ctxT(t), &legionpb.AssignmentsRequest{
			Deltas: true, EndpointTasks: true, SharedChanges: true, TypedValues: true, ResumeVersion: version, ResumeTerm: term})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The second manager's cache follows its replica from here on, as a
	// manager's does from when its store opens (the stream waits for its
	// first reading).
	b.Service.Follow(fst)
	if first := recv(t, open(b, 0, 0)); first.GetDelta() {
		t.Fatal("a stream that resumes from nothing began with changes")
	}

	s := open(a, 0, 0)
	node := newNodeModel(t, recv(t, s))
	put(t, lst, task("web", "a-2", "node-a", "", "", ""))
	d := recv(t, s)
	if !d.GetDelta() || d.GetVersion() == 0 || d.GetTerm() != lst.Raft().CurrentTerm() {
		t.Fatalf("a change: delta %v at version %d, term %d; want a delta that names its point (term %d)",
			d.GetDelta(), d.GetVersion(), d.GetTerm(), lst.Raft().CurrentTerm())
	}
	node.apply(t, d)

	// While the node follows no stream: a task goes, one comes, and the
	// secret they use changes.
	if _, err := lst.Delete(context.Background(), legion.KindTask, "web", "a-1", store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	put(t, lst, task("web", "a-3", "node-a", "token", "", ""))
	put(t, lst, secret("web", "token", "rotated"))
	// The stream on b reads b's replica: wait until it holds the writes.
	dispatchertest.Poll(t, "replication", 10*time.Second, func() bool { return fst.AppliedIndex() >= lst.AppliedIndex() })

	r := recv(t, open(b, d.GetVersion(), d.GetTerm()))
	if !r.GetDelta() {
		t.Fatal("a stream resuming from a point its manager saw began with a whole set")
	}
	if put := r.GetTaskChanges().PutMap(); put["web\x00a-3"] == nil || !slices.Contains(r.GetTaskChanges().GetRemoved(), "web\x00a-1") {
		t.Fatalf("resumed: task changes put %v, removed %q; want a-3 put and a-1 removed", slices.Sorted(maps.Keys(put)),
			r.GetTaskChanges().GetRemoved())
	}
	if v := r.GetValueChanges(); !v.GetReplace() || string(v.PutMap()["Secret/web/token"]) != "rotated" {
		t.Fatalf("resumed: values %v, want them whole, the secret rotated", v)
	}
	node.apply(t, r)
	whole := newNodeModel(t, recv(t, open(b, 0, 0)))
	if !maps.Equal(node.tasks, whole.tasks) || !maps.Equal(node.values, whole.values) {
		t.Fatalf("resumed: tasks %v values %v; a whole set has tasks %v values %v", node.tasks, node.values, whole.tasks, whole.values)
	}

	for _, p := range []struct {
		what          string
		version, term uint64
	}{
		{"another term", d.GetVersion(), d.GetTerm() + 1},
		{"a version from before the cache read the store", 1, d.GetTerm()},
		{"a version not yet written", d.GetVersion() + 1000, d.GetTerm()},
	} {
		if first := recv(t, open(b, p.version, p.term)); first.GetDelta() {
			t.Errorf("resuming from %s: the stream began with changes, want a whole set", p.what)
		}
	}
}

// nodeModel is a node's tasks and values as a stream leaves them.
type nodeModel struct {
	tasks  map[string]string // key: namespace/name@node
	values map[string]string
}

func newNodeModel(t *testing.T, whole *legionpb.AssignmentSet) *nodeModel {
	t.Helper()
	if whole.GetDelta() {
		t.Fatal("a stream's first message is changes, want a whole set")
	}
	n := &nodeModel{tasks: map[string]string{}, values: map[string]string{}}
	for _, raw := range whole.GetTasks() {
		n.putTask(t, raw)
	}
	for k, v := range whole.GetValues() {
		n.values[k] = string(v)
	}
	return n
}

func (n *nodeModel) putTask(t *testing.T, raw []byte) {
	t.Helper()
	o, err := legion.FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	md := o.GetMetadata()
	n.tasks[md.Namespace+"\x00"+md.Name] = md.Namespace + "/" + md.Name + "@" + o.(*legion.Task).Spec.Node
}

func (n *nodeModel) apply(t *testing.T, d *legionpb.AssignmentSet) {
	t.Helper()
	if tc := d.GetTaskChanges(); tc != nil {
		if tc.GetReplace() {
			clear(n.tasks)
		}
		for _, e := range tc.GetPut() {
			n.putTask(t, e.GetValue())
		}
		for _, k := range tc.GetRemoved() {
			delete(n.tasks, k)
		}
	}
	if vc := d.GetValueChanges(); vc != nil {
		if vc.GetReplace() {
			clear(n.values)
		}
		for _, e := range vc.GetPut() {
			n.values[e.GetKey()] = string(e.GetValue())
		}
		for _, k := range vc.GetRemoved() {
			delete(n.values, k)
		}
	}
}
