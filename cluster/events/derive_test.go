package events

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func task(state legion.TaskState, msg string, edit ...func(*legion.Task)) *legion.Task {
	t := &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Namespace: "shop", Name: "web-1-abc"}}}
	t.Spec.Node = "n1"
	t.Status.State, t.Status.Message = state, msg
	for _, e := range edit {
		e(t)
	}
	return t
}

func service(u *legion.UpdateStatus) *legion.Service {
	s := &legion.Service{Header: legion.Header{Kind: legion.KindService, Metadata: legion.Metadata{Namespace: "shop", Name: "web", Generation: 3}}}
	s.Status.Update = u
	return s
}

// replicas gives s a replica count, and with auto above 0 an autoscaler
// whose count that is.
func replicas(s *legion.Service, n, auto int) *legion.Service {
	s.Spec.Mode, s.Spec.Replicas = legion.ModeReplicated, &n
	if auto > 0 {
		s.Spec.Autoscale = &legion.Autoscale{Min: 1, Max: 10, CPU: 80}
		s.Status.Autoscale = &legion.AutoscaleStatus{Replicas: auto}
	}
	return s
}

func withPressure(n *legion.Node) *legion.Node {
	n.Status.MemoryPressure = true
	return n
}

func withPortErrors(n *legion.Node, errs ...legion.PortError) *legion.Node {
	n.Status.PublishErrors = errs
	return n
}

func node(state legion.NodeState, avail legion.Availability, drain *legion.DrainStatus) *legion.Node {
	n := &legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "n1"}}}
	n.Spec.Role, n.Spec.Availability = legion.RoleWorker, avail
	n.Status.State, n.Status.Drain = state, drain
	return n
}

func cronJob(last *time.Time, msg string) *legion.CronJob {
	c := &legion.CronJob{Header: legion.Header{Kind: legion.KindCronJob, Metadata: legion.Metadata{Namespace: "shop", Name: "nightly"}}}
	c.Status.LastSchedule, c.Status.Message = last, msg
	return c
}

// reasons is "Type Reason: message" per event.
func reasons(evs []legion.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, string(e.Type)+" "+e.Reason+": "+e.Message)
	}
	return out
}

func TestDerive(t *testing.T) {
	t.Parallel()
	started := t0
	later := t0.Add(time.Minute)
	cases := []struct {
		name    string
		old, nw legion.Object
		want    []string
	}{
		{"task placed", task(legion.TaskPending, ""), task(legion.TaskAssigned, ""),
			[]string{"Normal Scheduled: assigned to node n1"}},
		{"task running", task(legion.TaskStarting, "creating the pod"), task(legion.TaskRunning, ""),
			[]string{"Normal TaskStarted: started on node n1"}},
		{"preparing says nothing", task(legion.TaskAccepted, ""), task(legion.TaskPreparing, "pulling images"), []string{}},
		{"crash backoff drops the attempt", task(legion.TaskRunning, ""),
			task(legion.TaskRunning, "container app exited with 1: restarting in 2s (attempt 3)"),
			[]string{"Warning BackOff: container app exited with 1: restarting in 2s"}},
		{"liveness probe", task(legion.TaskRunning, ""), task(legion.TaskRunning, "container app liveness probe failed: timeout"),
			[]string{"Warning ProbeFailed: container app liveness probe failed: timeout"}},
		{"readiness probe", task(legion.TaskRunning, ""), task(legion.TaskRunning, "container app not ready: HTTP 500"),
			[]string{"Warning ProbeFailed: container app not ready: HTTP 500"}},
		{"same status again", task(legion.TaskRunning, "container app not ready: HTTP 500"),
			task(legion.TaskRunning, "container app not ready: HTTP 500"), []string{}},
		{"unschedulable new task", nil, task(legion.TaskPending, "no node has 4 CPUs free"),
			[]string{"Warning Unschedulable: no node has 4 CPUs free"}},
		{"quota", task(legion.TaskPending, ""), task(legion.TaskPending, "over the quota of namespace shop: tasks 3 of 2"),
			[]string{"Warning QuotaRefused: over the quota of namespace shop: tasks 3 of 2"}},
		{"pull failure", task(legion.TaskPreparing, "pulling images"), task(legion.TaskFailed, "pulling r/x:1: not found"),
			[]string{"Warning ImagePullFailed: pulling r/x:1: not found", "Warning TaskFailed: failed on node n1: pulling r/x:1: not found"}},
		{"wrong platform", task(legion.TaskPreparing, ""), task(legion.TaskRejected, "no arm64 image", func(t *legion.Task) {
			t.Status.WrongPlatform = &legion.Platform{OS: "freebsd", Arch: "arm64"}
		}), []string{"Warning WrongPlatform: no image for freebsd/arm64 on node n1: no arm64 image"}},
		{"orphaned", task(legion.TaskRunning, ""), task(legion.TaskOrphaned, "node down"),
			[]string{"Warning TaskOrphaned: lost with node n1: node down"}},
		{"stopped", task(legion.TaskRunning, ""), task(legion.TaskShutdown, "stopped"), []string{"Normal TaskStopped: stopped"}},
		{"stopped, saying why", task(legion.TaskRunning, ""), task(legion.TaskShutdown, "stopped", func(t *legion.Task) {
			t.Spec.DesiredState, t.Spec.StopReason = legion.TaskShutdown, "evicted by taint k:NoExecute"
		}), []string{"Normal TaskStopped: stopped (evicted by taint k:NoExecute)"}},
		{"task deleted", task(legion.TaskShutdown, ""), nil, []string{}},
		{"system namespace", nil, func() legion.Object {
			x := task(legion.TaskFailed, "x")
			x.Metadata.Namespace = legion.SystemNamespace
			return x
		}(), []string{}},
		{"update started", service(nil), service(&legion.UpdateStatus{State: legion.UpdateUpdating, Started: &started}),
			[]string{"Normal UpdateStarted: to generation 3"}},
		{"scaled", replicas(service(nil), 2, 0), replicas(service(nil), 3, 0), []string{"Normal Scaled: from 2 to 3 replicas"}},
		{"scaled by the autoscaler", replicas(service(nil), 2, 4), replicas(service(nil), 2, 6), []string{"Normal Scaled: from 4 to 6 replicas by its autoscaler"}},
		{"same count", replicas(service(nil), 2, 0), replicas(service(nil), 2, 0), []string{}},
		{"a new service is not scaled", nil, replicas(service(nil), 2, 0), []string{}},
		{"update restarted", service(&legion.UpdateStatus{State: legion.UpdateUpdating, Started: &started}),
			service(&legion.UpdateStatus{State: legion.UpdateUpdating, Started: &later}),
			[]string{"Normal UpdateStarted: to generation 3"}},
		{"rollback", service(&legion.UpdateStatus{State: legion.UpdateUpdating, Started: &started}),
			service(&legion.UpdateStatus{State: legion.UpdateRollingBack, Message: "task failed", Started: &started}),
			[]string{"Warning UpdateRollingBack: task failed"}},
		{"rolled back", service(&legion.UpdateStatus{State: legion.UpdateRollingBack, Started: &started}),
			service(&legion.UpdateStatus{State: legion.UpdateRolledBack, Started: &started}),
			[]string{"Warning UpdateRolledBack: "}},
		{"paused", service(&legion.UpdateStatus{State: legion.UpdateUpdating, Started: &started}),
			service(&legion.UpdateStatus{State: legion.UpdatePaused, Message: "2 failed", Started: &started}),
			[]string{"Warning UpdatePaused: 2 failed"}},
		{"node joins", nil, node(legion.NodeUnknown, legion.AvailabilityActive, nil),
			[]string{"Normal NodeJoined: joined as worker"}},
		{"node ready", node(legion.NodeUnknown, legion.AvailabilityActive, nil), node(legion.NodeReady, legion.AvailabilityActive, nil),
			[]string{"Normal NodeReady: heartbeats arrive"}},
		{"node suspect then down", node(legion.NodeReady, legion.AvailabilityActive, nil), node(legion.NodeDown, legion.AvailabilityActive, nil),
			[]string{"Warning NodeDown: heartbeats stopped; its tasks are orphaned"}},
		{"drain", node(legion.NodeReady, legion.AvailabilityActive, nil), node(legion.NodeReady, legion.AvailabilityDrain, &legion.DrainStatus{State: legion.DrainDraining}),
			[]string{"Normal NodeDraining: moving its tasks elsewhere"}},
		{"drained", node(legion.NodeReady, legion.AvailabilityDrain, &legion.DrainStatus{State: legion.DrainDraining}),
			node(legion.NodeReady, legion.AvailabilityDrain, &legion.DrainStatus{State: legion.DrainCompleted}),
			[]string{"Normal NodeDrained: nothing left on it"}},
		{"drain blocked", node(legion.NodeReady, legion.AvailabilityDrain, &legion.DrainStatus{State: legion.DrainDraining}),
			node(legion.NodeReady, legion.AvailabilityDrain, &legion.DrainStatus{State: legion.DrainBlocked,
				Remaining: []legion.DrainItem{{Kind: legion.KindVolume, Name: "shop/db", Reason: "local"}}}),
			[]string{"Warning DrainBlocked: Volume shop/db: local"}},
		{"node removed", node(legion.NodeDown, legion.AvailabilityActive, nil), nil, []string{"Normal NodeRemoved: removed from the cluster"}},
		{"a published port held elsewhere", node(legion.NodeReady, legion.AvailabilityActive, nil),
			withPortErrors(node(legion.NodeReady, legion.AvailabilityActive, nil), legion.PortError{Port: 8080, Error: "address already in use"}),
			[]string{"Warning PortNotPublished: published port 8080 not served here: address already in use"}},
		{"the same port problem again", withPortErrors(node(legion.NodeReady, legion.AvailabilityActive, nil), legion.PortError{Port: 8080, Error: "address already in use"}),
			withPortErrors(node(legion.NodeReady, legion.AvailabilityActive, nil), legion.PortError{Port: 8080, Error: "address already in use"}), nil},
		{"a published port served again", withPortErrors(node(legion.NodeReady, legion.AvailabilityActive, nil), legion.PortError{Port: 8080, Error: "address already in use"}),
			node(legion.NodeReady, legion.AvailabilityActive, nil), []string{"Normal PortPublished: published port 8080 served again"}},
		{"memory pressure", node(legion.NodeReady, legion.AvailabilityActive, nil), withPressure(node(legion.NodeReady, legion.AvailabilityActive, nil)),
			[]string{"Warning MemoryPressure: available memory below its agent's eviction threshold: tasks requesting no memory are evicted and not placed here"}},
		{"memory pressure over", withPressure(node(legion.NodeReady, legion.AvailabilityActive, nil)), node(legion.NodeReady, legion.AvailabilityActive, nil),
			[]string{"Normal MemoryPressureOver: available memory above its agent's eviction threshold again"}},
		{"volume moved", &legion.Volume{Header: legion.Header{Kind: legion.KindVolume, Metadata: legion.Metadata{Namespace: "shop", Name: "db"}},
			Status: legion.VolumeStatus{Node: "n1"}},
			&legion.Volume{Header: legion.Header{Kind: legion.KindVolume, Metadata: legion.Metadata{Namespace: "shop", Name: "db"}},
				Status: legion.VolumeStatus{Node: "n2"}},
			[]string{"Normal VolumeMoved: from node n1 to node n2"}},
		{"job failed", &legion.Job{Header: legion.Header{Kind: legion.KindJob, Metadata: legion.Metadata{Namespace: "shop", Name: "j"}},
			Status: legion.JobStatus{State: legion.JobRunning}},
			&legion.Job{Header: legion.Header{Kind: legion.KindJob, Metadata: legion.Metadata{Namespace: "shop", Name: "j"}},
				Status: legion.JobStatus{State: legion.JobFailed, Message: "backoff limit"}},
			[]string{"Warning JobFailed: backoff limit"}},
		{"cron job first seen", nil, cronJob(nil, ""), []string{}},
		{"cron job run", cronJob(nil, ""), cronJob(&t0, ""),
			[]string{"Normal JobCreated: job nightly-29455384 for the run of 2026-01-02T03:04:05Z"}},
		{"cron job run skipped", cronJob(&started, ""), cronJob(&later, "skipped the run of 2026-01-02T03:05:05Z: job nightly-29455384 still runs"),
			[]string{"Warning RunSkipped: skipped the run of 2026-01-02T03:05:05Z: job nightly-29455384 still runs"}},
		{"cron job status written again", cronJob(&t0, ""), cronJob(&t0, ""), []string{}},
		{"untracked kind", nil, &legion.Config{Header: legion.Header{Kind: legion.KindConfig, Metadata: legion.Metadata{Name: "c"}}}, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Derive(c.old, c.nw, t0)
			if g, w := strings.Join(reasons(got), "\n"), strings.Join(c.want, "\n"); g != w {
				t.Fatalf("got\n%s\nwant\n%s", g, w)
			}
			for _, e := range got {
				if !e.Time.Equal(t0) || e.Count != 1 || e.Object.Name == "" || e.Object.Kind == "" {
					t.Errorf("event %+v: want time %v, count 1 and its object named", e, t0)
				}
			}
		})
	}
}

func TestTrackerComparesWithTheLastChange(t *testing.T) {
	t.Parallel()
	tr := NewTracker([]legion.Object{task(legion.TaskAssigned, "")})
	if evs := tr.Change(task(legion.TaskRunning, ""), false, t0); len(evs) != 1 || evs[0].Reason != legion.ReasonTaskStarted {
		t.Fatalf("first change: %v", reasons(evs))
	}
	// The same change seen again (a watch starting below a listing) says
	// nothing more.
	if evs := tr.Change(task(legion.TaskRunning, ""), false, t0); len(evs) != 0 {
		t.Fatalf("repeat: %v", reasons(evs))
	}
	evs := tr.Resync([]legion.Object{task(legion.TaskFailed, "container app exited with 1"), node(legion.NodeReady, legion.AvailabilityActive, nil)}, t0)
	if got := strings.Join(reasons(evs), "|"); got != "Normal NodeJoined: joined as worker|Normal NodeReady: heartbeats arrive|Warning TaskFailed: failed on node n1: container app exited with 1" {
		t.Fatalf("resync: %s", got)
	}
	if evs := tr.Change(node(legion.NodeReady, legion.AvailabilityActive, nil), true, t0); len(evs) != 1 || evs[0].Reason != legion.ReasonNodeRemoved {
		t.Fatalf("delete: %v", reasons(evs))
	}
}
