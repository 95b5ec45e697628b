package lab_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/lab"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
	"github.com/legionbsd/legion/scheduler"
)

// podStop is how long the hello server takes to stop once its agent
// removes it (SIGTERM, exit, the runtime noticing).
const podStop = 500 * time.Millisecond

// helloImage is the example's image, loaded into every lab node.
const helloImage = "../../examples/hello/hello.oci.tar"

// webService is a replicated service of the hello image.
func webService(replicas int) string {
	return fmt.Sprintf(`apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: %d
  pod:
    containers:
      - name: web
        image: localhost/hello:1
        pullPolicy: never
        args: [-listen, "$(LEGION_POD_IP):8080"]
        ports: [{name: http, containerPort: 8080}]
        probes:
          readiness: {http: {path: /ready, port: http}, period: 1s}
`, replicas)
}

func apply(t *testing.T, c *client.Client, manifest string) {
	t.Helper()
	docs, err := legion.Decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ApplyOne(ctx, docs[0].Object, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// tasks lists the default namespace's tasks.
func tasks(c *client.Client) ([]*legion.Task, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	objs, _, err := c.List(ctx, legion.KindTask, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*legion.Task
	for _, o := range objs {
		out = append(out, o.(*legion.Task))
	}
	return out, nil
}

// readyByNode counts the running, ready tasks meant to run, by node id.
func readyByNode(ts []*legion.Task) map[string]int {
	out := map[string]int{}
	for _, tk := range ts {
		if tk.Spec.DesiredState == legion.TaskRunning && tk.Status.State == legion.TaskRunning && tk.Status.Ready {
			out[tk.Spec.Node]++
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// pods are the pods running on n (container id -> pid), read from its
// data directory as the daemon's own runtime does.
func pods(l *lab.Lab, n *lab.Node) map[string]int {
	rt, err := process.New(process.Config{DataDir: n.DataDir, Shim: l.Binary()})
	if err != nil {
		return nil
	}
	cs, _ := rt.List(context.Background(), nil)
	out := map[string]int{}
	for _, c := range cs {
		if !c.Infra && c.State == jail.StateRunning {
			out[c.ID] = c.Pid
		}
	}
	return out
}

func podCount(l *lab.Lab) int {
	n := 0
	for _, node := range l.Nodes {
		n += len(pods(l, node))
	}
	return n
}

// A worker cut off is suspect after three missed heartbeats and down
// after eight; its tasks are orphaned and replaced on the other nodes.
// Healed, it removes the orphaned pods, and the service runs more pods
// than its replicas (no update runs, so no surge) for no longer than one
// heartbeat round after the node is heard from again.
func workerCutOff(t *testing.T) {
	const replicas = 3
	l := lab.New(t, lab.Options{Managers: 1, Workers: 2, Images: []string{helloImage}})
	m := l.Managers()[0]
	c := l.Client(m)
	apply(t, c, webService(replicas))
	var victim *lab.Node
	if err := lab.WaitFor(60*time.Second, "the service ready with a task on a worker", func() bool {
		ts, err := tasks(c)
		if err != nil {
			return false
		}
		ready := readyByNode(ts)
		for _, w := range l.Workers() {
			if ready[w.ID] > 0 && sum(ready) == replicas {
				victim = w
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := tasks(c)
	var victimTasks []string
	for _, tk := range before {
		if tk.Spec.Node == victim.ID && tk.Spec.DesiredState == legion.TaskRunning {
			victimTasks = append(victimTasks, tk.Metadata.Name)
		}
	}
	victimPods := pods(l, victim)

	cutAt := time.Now()
	if err := l.Cut(victim); err != nil {
		t.Fatal(err)
	}
	var suspectAt, downAt time.Duration
	period := legion.HeartbeatPeriod
	if err := lab.WaitFor(time.Duration(scheduler.DownAfter+4)*period, victim.Name+" suspect, then down", func() bool {
		st, err := l.NodeStates(m)
		if err != nil {
			return false
		}
		switch st[victim.ID] {
		case legion.NodeSuspect:
			if suspectAt == 0 {
				suspectAt = time.Since(cutAt)
			}
		case legion.NodeDown:
			downAt = time.Since(cutAt)
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if suspectAt == 0 {
		t.Errorf("%s went down after %v without being seen suspect first", victim.Name, downAt)
	}
	// Heartbeats are missed from the last one before the cut, up to a
	// period earlier, and a period is as long as a heartbeat's way to
	// the leader lets it be (the leader notes when each arrives: under
	// load one late heartbeat makes the gap before the cut a little
	// longer); the leader's pass runs once a period.
	const arrival = 250 * time.Millisecond
	if lo := time.Duration(scheduler.SuspectAfter-1)*period - arrival; suspectAt != 0 && suspectAt < lo {
		t.Errorf("%s suspect after %v, before %d heartbeats could be missed", victim.Name, suspectAt, scheduler.SuspectAfter)
	}
	if lo := time.Duration(scheduler.DownAfter-1)*period - arrival; downAt < lo {
		t.Errorf("%s down after %v, before %d heartbeats could be missed", victim.Name, downAt, scheduler.DownAfter)
	}
	if err := lab.WaitFor(30*time.Second, "the victim's tasks orphaned and replaced elsewhere", func() bool {
		ts, err := tasks(c)
		if err != nil {
			return false
		}
		for _, tk := range ts {
			if slices.Contains(victimTasks, tk.Metadata.Name) && tk.Status.State != legion.TaskOrphaned {
				return false
			}
		}
		ready := readyByNode(ts)
		return ready[victim.ID] == 0 && sum(ready) == replicas
	}); err != nil {
		t.Fatal(err)
	}
	if got := pods(l, victim); len(got) != len(victimPods) {
		t.Errorf("cut off, %s runs %d pods, want its %d to go on running", victim.Name, len(got), len(victimPods))
	}

	healAt := time.Now()
	if err := l.Heal(victim); err != nil {
		t.Fatal(err)
	}
	// lastExtra is when more pods than replicas were last seen: the
	// sampling interval does not add to the excess measured.
	var readyAgain, lastExtra time.Duration
	if err := lab.WaitFor(30*time.Second, victim.Name+" ready again and no more pods than replicas", func() bool {
		if readyAgain == 0 {
			if st, err := l.NodeStates(m); err == nil && st[victim.ID] == legion.NodeReady {
				readyAgain = time.Since(healAt)
			}
		}
		if podCount(l) > replicas {
			lastExtra = time.Since(healAt)
			return false
		}
		return readyAgain != 0
	}); err != nil {
		t.Fatal(err)
	}
	for id := range victimPods {
		if _, ok := pods(l, victim)[id]; ok {
			t.Errorf("orphaned pod %s still runs on %s after healing", id, victim.Name)
		}
	}
	// One heartbeat round, and the time a pod takes to stop once told.
	if over, bound := lastExtra-readyAgain, period+podStop; over > bound {
		t.Errorf("%d replicas: more pods ran for %v after %s was heard from again, want at most one heartbeat round and a pod's stop (%v)", replicas, over, victim.Name, bound)
	}
	after, _ := tasks(c)
	if ready := readyByNode(after); sum(ready) != replicas {
		t.Errorf("after healing %d ready tasks, want %d: %v", sum(ready), replicas, ready)
	}
	t.Logf("worker cut: %s suspect after %v, down after %v; healed, ready after %v, extra pods last seen at %v; %d tasks before, %d after",
		victim.Name, suspectAt.Round(time.Millisecond), downAt.Round(time.Millisecond), readyAgain.Round(time.Millisecond),
		lastExtra.Round(time.Millisecond), len(before), len(after))
}

// A worker cut off from the manager it follows, a follower, but not from
// the others fails over to another: its heartbeats go on reaching the
// leader, it is never suspect or down, its pods keep running and nothing
// is rescheduled.
func workerCutOffFromItsManagerOnly(t *testing.T) {
	// The worker joins through m2, so its agent follows m2 while m1, which
	// ran init, leads.
	l := lab.New(t, lab.Options{Managers: 3, Workers: 1, Images: []string{helloImage}, JoinVia: "m2"})
	cutFromManagerOnly(t, l, l.Node("m2"), l.Node("m3"))
}

// The same, with the manager cut off being the leader: the worker's
// heartbeats and reports go to a follower, which passes them on to the
// leader (spec 3.2), so the worker is never down.
func workerCutOffFromTheLeaderOnly(t *testing.T) {
	l := lab.New(t, lab.Options{Managers: 3, Workers: 1, Images: []string{helloImage}})
	cutFromManagerOnly(t, l, l.Node("m1"), l.Node("m2"))
}

// cutFromManagerOnly cuts the lab's worker off from manager, which its
// agent follows, and checks through watcher that nothing changes for
// longer than a node takes to go down.
func cutFromManagerOnly(t *testing.T, l *lab.Lab, manager, watcher *lab.Node) {
	const replicas = 4
	w := l.Workers()[0]
	c := l.Client(watcher)
	apply(t, c, webService(replicas))
	if err := lab.WaitFor(60*time.Second, "the service ready with a task on the worker", func() bool {
		ts, err := tasks(c)
		if err != nil {
			return false
		}
		ready := readyByNode(ts)
		return ready[w.ID] > 0 && sum(ready) == replicas
	}); err != nil {
		t.Fatal(err)
	}
	leader, st, err := l.Leader()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := tasks(c)
	names := func(ts []*legion.Task) []string {
		var out []string
		for _, tk := range ts {
			out = append(out, tk.Metadata.Name)
		}
		slices.Sort(out)
		return out
	}
	podsBefore := pods(l, w)

	cutAt := time.Now()
	if err := l.Isolate(w, manager); err != nil {
		t.Fatal(err)
	}
	// Watch for longer than a node takes to go down: nothing may change.
	watch := time.Duration(scheduler.DownAfter+1) * legion.HeartbeatPeriod
	states := map[legion.NodeState]int{}
	sample := time.NewTicker(200 * time.Millisecond)
	defer sample.Stop()
	for range sample.C {
		if time.Since(cutAt) > watch {
			break
		}
		if st, err := l.NodeStates(watcher); err == nil {
			states[st[w.ID]]++
		}
	}
	if states[legion.NodeSuspect] > 0 || states[legion.NodeDown] > 0 || states[legion.NodeReady] == 0 {
		t.Errorf("%s, cut off from %s only, was seen %v (state: samples)", w.Name, manager.Name, states)
	}
	after, err := tasks(c)
	if err != nil {
		t.Fatal(err)
	}
	if b, a := names(before), names(after); !slices.Equal(b, a) {
		t.Errorf("tasks changed though %s was only cut from %s:\nbefore %v\nafter  %v", w.Name, manager.Name, b, a)
	}
	if ready := readyByNode(after); ready[w.ID] != readyByNode(before)[w.ID] || sum(ready) != replicas {
		t.Errorf("ready tasks by node %v, want %v", ready, readyByNode(before))
	}
	if podsAfter := pods(l, w); !maps.Equal(podsBefore, podsAfter) {
		t.Errorf("%s's pods changed (restarted or removed): before %v, after %v", w.Name, podsBefore, podsAfter)
	}
	if err := l.Rejoin(w, manager); err != nil {
		t.Fatal(err)
	}
	t.Logf("worker cut from %s only (leader %s, term %d): watched %v, node states sampled %v, %d tasks after, %d pods of the worker before",
		manager.Name, leader.Name, st.Term, watch, states, len(after), len(podsBefore))
}
