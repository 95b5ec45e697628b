package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/golden"
)

var describeNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func describeAgo(d time.Duration) *time.Time { t := describeNow.Add(-d); return &t }

func describeFixtures() (svc *legion.Service, tasks []*legion.Task, evs []legion.Event) {
	three := 3
	svc = &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"}, Version: 42, Generation: 2}}}
	svc.Spec.Mode, svc.Spec.Replicas = legion.ModeReplicated, &three
	svc.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "registry.example/web:2",
		Resources: legion.Resources{Requests: legion.ResourceRequests{CPU: 250, Memory: 64 << 20}}}}
	svc.Spec.Pod.RestartPolicy = &legion.RestartPolicy{Condition: legion.RestartOnFailure, Delay: legion.Duration(5 * time.Second)} // no limit
	svc.Spec.Update.FailureAction, svc.Spec.Update.Order = legion.FailureRollback, legion.StopFirst
	down := legion.Duration(5 * time.Minute)
	svc.Spec.Autoscale = &legion.Autoscale{Min: 2, Max: 6, CPU: 60, DownDelay: &down}
	svc.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80,
		TargetPort: legion.PortRef{Number: 8080}, Publish: legion.PublishIngress, PublishedPort: 8080}}
	svc.Status = legion.ServiceStatus{Replicas: 3, Running: 2, Ready: 1, VIP: "10.96.0.7",
		Update: &legion.UpdateStatus{State: legion.UpdateRolledBack, Failure: "task web-2 failed", Started: describeAgo(5 * time.Minute), Completed: describeAgo(time.Minute)},
		Autoscale: &legion.AutoscaleStatus{Replicas: 3, Recommendations: []legion.Recommendation{
			{Time: *describeAgo(4 * time.Minute), Replicas: 4}, {Time: *describeAgo(30 * time.Second), Replicas: 3}}}}
	for i, st := range []legion.TaskState{legion.TaskRunning, legion.TaskRunning, legion.TaskPending} {
		t := &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Name: fmt.Sprintf("web-%d-a1", i+1), Namespace: "shop"}}}
		t.Spec.Owner, t.Spec.Slot, t.Spec.DesiredState = legion.Owner{Kind: legion.KindService, Name: "web"}, i+1, legion.TaskRunning
		t.Spec.Pod = svc.Spec.Pod
		t.Status.State, t.Status.Timestamp = st, describeNow.Add(-time.Duration(i+1)*time.Minute)
		if st == legion.TaskRunning {
			t.Spec.Node = "n" + fmt.Sprint(i+1)
			t.Status.Ready = i == 0
		}
		if i == 1 {
			t.Status.Restarts, t.Status.Message = 4, "container app exited with 1: restarting in 8s (attempt 5)"
			t.Status.Containers = []legion.ContainerStatus{{Name: "app", State: "waiting", Restarts: 4, Message: "exited with 1"}}
		}
		if i == 2 {
			t.Status.Message = "over the quota of namespace shop: tasks 3 of 2"
		}
		tasks = append(tasks, t)
	}
	ev := func(ago time.Duration, typ legion.EventType, reason string, kind legion.Kind, name, msg string) legion.Event {
		return legion.Event{Time: describeNow.Add(-ago), Type: typ, Reason: reason, Count: 1, Message: msg,
			Object: legion.ObjectRef{Kind: kind, Namespace: "shop", Name: name}}
	}
	evs = []legion.Event{
		ev(5*time.Minute, legion.EventNormal, legion.ReasonUpdateStarted, legion.KindService, "web", "to generation 2"),
		ev(4*time.Minute, legion.EventWarning, legion.ReasonTaskFailed, legion.KindTask, "web-2-a1", "failed on node n2: container app exited with 1"),
		ev(3*time.Minute, legion.EventWarning, legion.ReasonUpdateRollingBack, legion.KindService, "web", "task web-2 failed"),
		ev(time.Minute, legion.EventWarning, legion.ReasonUpdateRolledBack, legion.KindService, "web", ""),
	}
	backoff := ev(10*time.Second, legion.EventWarning, legion.ReasonBackOff, legion.KindTask, "web-2-a1", "container app exited with 1: restarting in 8s")
	backoff.Count, backoff.First = 4, describeNow.Add(-2*time.Minute)
	evs = append(evs, backoff)
	for i := range evs {
		evs[i].Sequence = uint64(100+i) << 10
	}
	return svc, tasks, evs
}

func TestDescribeGolden(t *testing.T) {
	t.Parallel()
	svc, tasks, evs := describeFixtures()
	node := &legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "n2", Version: 9}}}
	node.Spec = legion.NodeSpec{Role: legion.RoleWorker, Availability: legion.AvailabilityDrain,
		Taints: []legion.Taint{{Key: "gpu", Value: "yes", Effect: legion.NoSchedule}, {Key: "maintenance", Effect: legion.NoExecute}}}
	node.Status = legion.NodeStatus{State: legion.NodeReady, Addr: "192.0.2.2:7946", Hostname: "n2.example", Version: "1.0.0",
		Platform:  legion.Platform{OS: "freebsd", Arch: "amd64"},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}, Allocatable: legion.ResourceRequests{CPU: 3500, Memory: 7 << 30}},
		Drain:     &legion.DrainStatus{State: legion.DrainBlocked, Remaining: []legion.DrainItem{{Kind: legion.KindVolume, Name: "shop/db", Reason: "its data is on this node"}}}}
	nodeEvs := []legion.Event{{Time: describeNow.Add(-time.Minute), Type: legion.EventNormal, Reason: legion.ReasonNodeDraining, Count: 1,
		Object: legion.ObjectRef{Kind: legion.KindNode, Name: "n2"}, Message: "moving its tasks elsewhere"}}
	cfg := &legion.Config{Header: legion.Header{Kind: legion.KindConfig, Metadata: legion.Metadata{Name: "site", Namespace: "shop", Version: 3}}}
	cfg.Spec.Data = []byte("hello")
	cron, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, namespace: shop}
spec:
  schedule: "0 3 * * *"
  concurrencyPolicy: forbid
  startingDeadline: 5m
  job:
    backoffLimit: 2
    pod: {containers: [{name: c, image: backup:1, args: [--all]}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cj := cron[0].(*legion.CronJob)
	cj.Metadata.Version = 12
	cj.Status.LastSchedule = describeAgo(9 * time.Hour)
	cj.Status.Active = []string{"nightly-29536740"}
	cj.Status.Message = "skipped the run of 2026-03-01T03:00:00Z: job nightly-29536740 still runs"
	ref := legion.ObjectRef{Kind: legion.KindCronJob, Namespace: "shop", Name: "nightly"}
	cronEvs := []legion.Event{
		{Time: describeNow.Add(-33 * time.Hour), Type: legion.EventNormal, Reason: legion.ReasonJobCreated, Count: 1, Object: ref,
			Message: "job nightly-29536740 for the run of 2026-02-28T03:00:00Z"},
		{Time: describeNow.Add(-9 * time.Hour), Type: legion.EventWarning, Reason: legion.ReasonRunSkipped, Count: 1, Object: ref,
			Message: "skipped the run of 2026-03-01T03:00:00Z: job nightly-29536740 still runs"}}
	// n2 cannot serve the service's published port: another process of
	// its host holds it.
	node.Status.PublishErrors = []legion.PortError{{Port: 8080, Error: "listen tcp 127.0.0.1:8080: bind: address already in use"}}
	node.Status.MemoryPressure = true
	other := &legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "n3"}}}
	other.Status.PublishErrors = []legion.PortError{{Port: 9090, Error: "not this service's"}}
	unpublished := publishProblems(svc, []legion.Object{node, other})
	for _, c := range []struct {
		name        string
		o           legion.Object
		tasks       []*legion.Task
		evs         []legion.Event
		unpublished []nodePortError
	}{
		{"cronjob", cj, nil, cronEvs, nil},
		{"service", svc, tasks, evs, unpublished},
		{"task", tasks[1], nil, evs[4:], nil},
		{"node", node, tasks[1:2], nodeEvs, nil},
		{"config", cfg, nil, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := describe(&b, c.o, c.tasks, c.evs, c.unpublished, describeNow); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "describe_"+c.name+".golden"), b.String())
		})
	}
}

func TestEventsTable(t *testing.T) {
	t.Parallel()
	_, _, evs := describeFixtures()
	for _, o := range []string{"table", "wide", "json"} {
		fm, err := parseOutput(o)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		l := eventListing(evs, true, describeNow)
		if err := l.print(&b, &b, fm); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "events_"+o+".golden"), b.String())
	}
}

// legion events refuses what it cannot ask before reaching any manager,
// saying which flag and what it takes.
func TestEventsFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--type", "error"}, `--type "error": expected normal or warning`},
		{[]string{"--object", "web"}, `--object "web": expected KIND/NAME`},
		{[]string{"--object", "pod/web"}, `--object: unknown kind "pod"`},
		{[]string{"--kind", "service", "--object", "job/x"}, "--object job/x is a Job, but --kind asks for Service"},
		{[]string{"-n", "shop", "-A"}, "-n shop and -A: choose one"},
		{[]string{"--since", "yesterday"}, `--since "yesterday"`},
		// kubectl's names of the same flags.
		{[]string{"--for", "web"}, `--object "web": expected KIND/NAME`},
		{[]string{"--types", "Warning,Error"}, `--type "Warning,Error": expected normal or warning`},
		{[]string{"--sort-by", ".reason"}, "events are listed oldest first by when they were last seen"},
	} {
		_, err := runLegion(t, "", append([]string{"events", "--server", "127.0.0.1:1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("legion events %v: %v, want it to say %q", c.args, err, c.says)
		}
	}
}

// legion events -f prints the header once, then each new event as a row
// aligned under the first rows' widths; a repeat comes again with its
// count.
func TestEventsFollowPrinterTable(t *testing.T) {
	t.Parallel()
	_, _, evs := describeFixtures()
	fm, err := parseOutput("table")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	p := &eventPrinter{w: &b, f: fm, now: func() time.Time { return describeNow }}
	if err := p.print(evs[:2]); err != nil {
		t.Fatal(err)
	}
	again := evs[4]
	again.Count, again.Time = 5, describeNow
	if err := p.print([]legion.Event{again}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "LAST SEEN") || strings.Count(b.String(), "LAST SEEN") != 1 {
		t.Fatalf("printed %d lines, want the header once then three rows:\n%s", len(lines), b.String())
	}
	// A later cell wider than the first rows' pushes its row along.
	col := strings.Index(lines[0], "REASON")
	for _, l := range lines[1:3] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q: REASON not at column %d", l, col)
		}
	}
	if !strings.HasPrefix(lines[3], "0s (x5 over 2m)") || !strings.Contains(lines[3], "BackOff") {
		t.Errorf("the repeat printed %q, want its count and reason", lines[3])
	}
}
