package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/scheduler"
)

// eventReasons reads the manager's events of the objects keep takes,
// their reasons in order.
func eventReasons(t *testing.T, cl *client.Client, o client.EventsOptions, keep func(legion.Event) bool) []string {
	t.Helper()
	var out []string
	err := cl.Events(context.Background(), o, func(e legion.Event) error {
		if keep(e) {
			out = append(out, e.Reason)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	return out
}

// follows reports whether want appears in got in this order, other
// reasons between allowed.
func follows(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// A global service on two workers: draining one shows the node draining,
// its task stopped and the node drained, in that order; killing the other
// (its agent gone, no more heartbeats) shows it suspect, then down, and
// its task orphaned. Each manager derives the same events, so a follower
// answers as the leader does.
func TestEventsOfADrainAndANodeKilled(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2, Leader: true, Workers: 2})
	cl := c.Client()
	agents := startWorkerAgents(t, c)
	applyManifest(t, cl, testPod("Service", "everywhere", "app", `[-listen, "$(LEGION_POD_IP):8080"]`, "mode: global")+servesHTTP("100ms"))
	drained, killed := c.Workers[0].Server.NodeID(), c.Workers[1].Server.NodeID()
	taskOn := map[string]string{}
	poll(t, "a ready task on each worker", 60*time.Second, func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range ts {
			if tk := o.(*legion.Task); readyOn("")(tk) {
				taskOn[tk.Spec.Node] = tk.Metadata.Name
			}
		}
		return taskOn[drained] != "" && taskOn[killed] != ""
	})
	of := func(kind legion.Kind, name string) func(legion.Event) bool {
		return func(e legion.Event) bool { return e.Object.Kind == kind && e.Object.Name == name }
	}

	setAvailability(t, cl, drained, legion.AvailabilityDrain)
	nodeWant := []string{legion.ReasonNodeDraining, legion.ReasonNodeDrained}
	// What was seen, said if the wait fails.
	var nodeSaw, taskSaw []string
	drainSeen := false
	t.Cleanup(func() {
		if !drainSeen {
			t.Logf("the drain's events seen: node %s %v, task %s %v", drained, nodeSaw, taskOn[drained], taskSaw)
		}
	})
	poll(t, "the drain's events", 60*time.Second, func() bool {
		nodeSaw = eventReasons(t, cl, client.EventsOptions{Kind: legion.KindNode, Object: drained}, of(legion.KindNode, drained))
		taskSaw = eventReasons(t, cl, client.EventsOptions{Namespace: legion.DefaultNamespace}, of(legion.KindTask, taskOn[drained]))
		return follows(nodeSaw, nodeWant) && follows(taskSaw, []string{legion.ReasonScheduled, legion.ReasonTaskStarted, legion.ReasonTaskStopped})
	})
	drainSeen = true

	agents[1].stop()
	window := time.Duration(scheduler.DownAfter+8) * legion.HeartbeatPeriod
	poll(t, "the killed node's events", window, func() bool {
		return follows(eventReasons(t, cl, client.EventsOptions{Kind: legion.KindNode}, of(legion.KindNode, killed)),
			[]string{legion.ReasonNodeReady, legion.ReasonNodeSuspect, legion.ReasonNodeDown}) &&
			follows(eventReasons(t, cl, client.EventsOptions{Type: legion.EventWarning}, of(legion.KindTask, taskOn[killed])),
				[]string{legion.ReasonTaskOrphaned})
	})
	// The other manager derived the same from the same log.
	leader := c.WaitLeader()
	other := c.Followers(leader)[0]
	all := func(cl *client.Client) string {
		return strings.Join(eventReasons(t, cl, client.EventsOptions{Kind: legion.KindNode, Object: killed}, of(legion.KindNode, killed)), " ")
	}
	lead, follow := c.ClientTo(leader), c.ClientTo(other)
	poll(t, "the follower's events of the killed node to match the leader's", 10*time.Second, func() bool {
		return all(lead) == all(follow)
	})
}
