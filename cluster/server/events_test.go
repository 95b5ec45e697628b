package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/events"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

// names is each event's kind/namespace/name and reason.
func eventNames(evs []legion.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Object.String()+" "+e.Reason)
	}
	return strings.Join(out, ", ")
}

func readEvents(t *testing.T, c *client.Client, o client.EventsOptions) ([]legion.Event, error) {
	t.Helper()
	var evs []legion.Event
	err := c.Events(context.Background(), o, func(e legion.Event) error { evs = append(evs, e); return nil })
	return evs, err
}

// The manager derives events from what it applies, with no controller
// running: a node written joining, ready, then down shows each step, in
// order, with the same sequences at a follower.
func TestEventsComeFromAppliedChanges(t *testing.T) {
	t.Parallel()
	m, n, admin := joinedPair(t, "manager")
	ctx := context.Background()
	st := m.s.store()
	if !st.IsLeader() {
		st = n.s.store()
	}
	node := &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode, Metadata: legion.Metadata{Name: "n9"}}}
	node.Spec = legion.NodeSpec{Role: legion.RoleWorker, Availability: legion.AvailabilityActive}
	if _, _, err := st.Put(ctx, node, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, state := range []legion.NodeState{legion.NodeReady, legion.NodeDown} {
		node.Status.State = state
		if _, err := st.PutStatus(ctx, node, store.Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
	want := "Node/n9 NodeJoined, Node/n9 NodeReady, Node/n9 NodeDown"
	var evs []legion.Event
	waitFor(t, "the node's events", 10*time.Second, func() bool {
		var err error
		evs, err = readEvents(t, admin, client.EventsOptions{Kind: legion.KindNode, Object: "n9"})
		return err == nil && eventNames(evs) == want
	})
	for _, mgr := range []*manager{m, n} {
		var got []legion.Event
		waitFor(t, "manager "+mgr.addr+"'s events of the node", 10*time.Second, func() bool {
			got = mgr.s.eventRing().Read(events.Filter{Kind: legion.KindNode, Name: "n9"})
			return eventNames(got) == want
		})
		for i, e := range got {
			if e.Sequence != evs[i].Sequence || e.Type != evs[i].Type || e.Message != evs[i].Message {
				t.Errorf("manager %s: event %+v, want it as %+v", mgr.addr, e, evs[i])
			}
		}
	}
	if evs[2].Type != legion.EventWarning {
		t.Errorf("NodeDown is %s, want a warning", evs[2].Type)
	}
	if _, err := readEvents(t, admin, client.EventsOptions{Kind: "Pod"}); client.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `unknown kind "Pod"`) {
		t.Errorf("events of kind Pod: %v, want an invalid argument naming the kind", err)
	}
}

// A user sees the events of the namespaces it may read only: listing,
// asking for a namespace of another's, and following.
func TestUserEventsShowOnlyReadableNamespaces(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.Apply(ctx, []legion.Object{namespaceObj("shop"), namespaceObj("lab"), roleBinding("shop", "bob", legion.RoleView)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	bob := userClient(t, admin, m.addr, "bob")
	ring := m.s.eventRing()
	ev := func(kind legion.Kind, ns, name, reason string) legion.Event {
		return legion.Event{Time: time.Now(), Type: legion.EventWarning, Reason: reason, Object: legion.ObjectRef{Kind: kind, Namespace: ns, Name: name}}
	}
	// Far past any index this cluster reaches, so these come last.
	ring.Add(1<<40, ev(legion.KindTask, "lab", "secret-1", "TaskFailed"), ev(legion.KindNode, "", "n1", "NodeDown"),
		ev(legion.KindTask, "shop", "web-1", "TaskFailed"))
	evs, err := readEvents(t, bob, client.EventsOptions{Type: legion.EventWarning})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventNames(evs); got != "Task/shop/web-1 TaskFailed" {
		t.Errorf("bob's events: %s, want shop's only", got)
	}
	if all, _ := readEvents(t, admin, client.EventsOptions{Type: legion.EventWarning}); len(all) != 3 {
		t.Errorf("the admin's events: %s, want all three", eventNames(all))
	}
	_, err = readEvents(t, bob, client.EventsOptions{Namespace: "lab"})
	refused(t, "bob's events of lab", err, "no role in namespace lab")
	_, err = readEvents(t, bob, client.EventsOptions{Kind: legion.KindNode})
	refused(t, "bob's events of nodes", err, "cluster-scoped")

	got := make(chan legion.Event, 4)
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- bob.Events(fctx, client.EventsOptions{Follow: true, AfterSequence: evs[0].Sequence},
			func(e legion.Event) error { got <- e; return nil })
	}()
	ring.Add(1<<40+1, ev(legion.KindTask, "lab", "secret-2", "BackOff"))
	ring.Add(1<<40+2, ev(legion.KindTask, "shop", "web-2", "BackOff"))
	select {
	case e := <-got:
		if e.Object.Namespace != "shop" || e.Object.Name != "web-2" {
			t.Errorf("bob followed %s first, want shop's web-2", e.Object)
		}
	case <-ctx.Done():
		t.Fatal("bob's follow showed nothing")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("follow ended with %v, want nil once its context ended", err)
	}
}

// A CronJob's runs are events of the CronJob: the planner's status write
// for a run that fell due says which Job it made, or why it skipped it.
func TestCronJobRunsAreEvents(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	applyOK(t, c, "apiVersion: legion/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: '0 3 * * *'\n  job: {pod: {containers: [{name: c, image: n:1}]}}\n")
	st := m.s.Store()
	due := time.Now().UTC().Truncate(time.Minute)
	for _, msg := range []string{"", "skipped the run of " + due.Add(time.Minute).Format(time.RFC3339) + ": suspended"} {
		o, _, err := st.Get(legion.KindCronJob, "default", "nightly")
		if err != nil {
			t.Fatal(err)
		}
		cj := o.(*legion.CronJob)
		at := due
		if msg != "" {
			at = due.Add(time.Minute)
		}
		cj.Status.LastSchedule, cj.Status.Message = &at, msg
		if _, err := st.PutStatus(ctx, cj, store.Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
	want := "CronJob/default/nightly JobCreated, CronJob/default/nightly RunSkipped"
	var evs []legion.Event
	waitFor(t, "the cron job's events", 10*time.Second, func() bool {
		var err error
		evs, err = readEvents(t, c, client.EventsOptions{Kind: legion.KindCronJob, Object: "nightly"})
		return err == nil && eventNames(evs) == want
	})
	if name := legion.CronJobRunName("nightly", due); !strings.Contains(evs[0].Message, "job "+name) {
		t.Errorf("JobCreated says %q, want it to name job %s", evs[0].Message, name)
	}
}
