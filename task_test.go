package legion

import (
	"testing"
	"time"
)

func TestTaskStateMachine(t *testing.T) {
	t.Parallel()
	allowed := []struct{ from, to TaskState }{
		{TaskPending, TaskAssigned}, {TaskAssigned, TaskAccepted}, {TaskAccepted, TaskPreparing},
		{TaskPreparing, TaskStarting}, {TaskStarting, TaskRunning}, {TaskRunning, TaskComplete},
		{TaskPending, TaskRunning}, // states may be skipped forward (an agent reports what it sees)
		{TaskPending, TaskFailed}, {TaskAssigned, TaskFailed}, {TaskRunning, TaskFailed},
		{TaskPending, TaskRejected}, {TaskAssigned, TaskRejected}, {TaskPreparing, TaskRejected},
		{TaskPending, TaskShutdown}, {TaskRunning, TaskShutdown}, {TaskAssigned, TaskOrphaned}, {TaskRunning, TaskOrphaned},
	}
	refused := []struct{ from, to TaskState }{
		{TaskRunning, TaskPending}, {TaskRunning, TaskStarting}, {TaskAssigned, TaskPending},
		{TaskComplete, TaskRunning}, {TaskFailed, TaskRunning}, {TaskShutdown, TaskFailed}, {TaskOrphaned, TaskShutdown},
		{TaskRunning, TaskRejected}, {TaskStarting, TaskRejected}, {TaskPending, TaskComplete}, {TaskAssigned, TaskComplete},
		{TaskRunning, TaskRunning}, {"bogus", TaskRunning}, {TaskRunning, "bogus"},
	}
	for _, c := range allowed {
		if !CanTransition(c.from, c.to) {
			t.Errorf("%s -> %s refused, want allowed", c.from, c.to)
		}
	}
	for _, c := range refused {
		if CanTransition(c.from, c.to) {
			t.Errorf("%s -> %s allowed, want refused", c.from, c.to)
		}
	}
	for _, s := range []TaskState{TaskComplete, TaskFailed, TaskRejected, TaskShutdown, TaskOrphaned} {
		if !s.Terminal() {
			t.Errorf("%s is not terminal", s)
		}
	}
	for _, s := range []TaskState{TaskPending, TaskAssigned, TaskAccepted, TaskPreparing, TaskStarting, TaskRunning} {
		if s.Terminal() {
			t.Errorf("%s is terminal", s)
		}
	}

	task := &Task{}
	task.Metadata.Name = "web-1-1"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if err := task.Transition(TaskRunning, now, "started"); err != nil {
		t.Fatal(err)
	}
	task.Status.Ready = true
	if err := task.Transition(TaskAssigned, now, ""); err == nil {
		t.Fatal("a running task went back to assigned")
	}
	if err := task.Transition(TaskFailed, now.Add(time.Second), "exit 1"); err != nil {
		t.Fatal(err)
	}
	if task.Status.Ready || task.Status.State != TaskFailed || task.Status.Message != "exit 1" || !task.Status.Timestamp.Equal(now.Add(time.Second)) {
		t.Fatalf("after failing: %+v", task.Status)
	}
}

func TestPodHelpers(t *testing.T) {
	t.Parallel()
	o := admitOne(t, manifest("Service", "x", svcSpec("", `initContainers: [{name: i, image: n, resources: {requests: {cpu: 2, memory: 64Mi}}}],
  containers: [{name: a, image: n, ports: [{name: http, containerPort: 80}], resources: {requests: {cpu: 500m, memory: 1Gi}}},
               {name: b, image: n, ports: [{containerPort: 53, protocol: udp}], resources: {requests: {cpu: 250m}, limits: {maxproc: 10}}}]`)))
	s := o.(*Service)
	r := s.Spec.Pod.Requests()
	if r.CPU != 2000 || r.Memory != 1<<30 {
		t.Errorf("Requests() = %s/%s, want the init container's 2 CPUs and the containers' 1Gi", r.CPU, r.Memory)
	}
	if !s.Spec.Pod.HasLimits() {
		t.Error("HasLimits missed maxproc")
	}
	if p, ok := s.Spec.Pod.FindPort(PortRef{Name: "http"}); !ok || p.ContainerPort != 80 {
		t.Errorf("FindPort(http) = %+v %v", p, ok)
	}
	if p, ok := s.Spec.Pod.FindPort(PortRef{Number: 53}); !ok || p.Protocol != UDP {
		t.Errorf("FindPort(53) = %+v %v", p, ok)
	}
	if _, ok := s.Spec.Pod.FindPort(PortRef{Name: "nope"}); ok {
		t.Error("FindPort found a missing name")
	}
	if s.WantedReplicas() != 1 {
		t.Errorf("WantedReplicas = %d", s.WantedReplicas())
	}
	s.Spec.Autoscale = &Autoscale{Min: 1, Max: 5}
	s.Status.Autoscale = &AutoscaleStatus{Replicas: 4}
	if s.WantedReplicas() != 4 {
		t.Errorf("WantedReplicas with autoscale = %d, want 4", s.WantedReplicas())
	}
	if !MatchLabels(map[string]string{"app": "web"}, map[string]string{"app": "web", "x": "y"}) ||
		MatchLabels(map[string]string{"app": "db"}, map[string]string{"app": "web"}) || !MatchLabels(nil, nil) {
		t.Error("MatchLabels")
	}
}

func TestObjectHelpers(t *testing.T) {
	t.Parallel()
	for _, k := range Kinds() {
		o, err := New(k)
		if err != nil {
			t.Fatal(err)
		}
		if o.GetKind() != k || o.SpecPtr() == nil {
			t.Errorf("New(%s) = %+v", k, o)
		}
	}
	if _, err := New("Pod"); err == nil {
		t.Error("New(Pod) succeeded")
	}
	o := admitOne(t, manifest("Service", "web", svcSpec("", "containers: [{name: a, image: n}]")))
	data, _ := MarshalJSON(o)
	back, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MarshalJSON(back)
	if string(again) != string(data) {
		t.Errorf("FromJSON round trip:\n%s\n%s", data, again)
	}
	c := Clone(o).(*Service)
	c.Spec.Pod.Containers[0].Image = "changed"
	if o.(*Service).Spec.Pod.Containers[0].Image != "n" {
		t.Error("Clone shares the pod")
	}
	spec, _ := MarshalJSONValue(o.SpecPtr())
	a, err := Assemble(KindService, *o.GetMetadata(), spec, []byte(`{"ready":2}`))
	if err != nil || a.(*Service).Status.Ready != 2 || a.(*Service).Spec.Pod.Containers[0].Image != "n" {
		t.Errorf("Assemble: %+v %v", a, err)
	}
	if ObjectKey(o) != "Service/default/web" || DisplayName(o) != "default/web" {
		t.Errorf("key %q name %q", ObjectKey(o), DisplayName(o))
	}
}

// A task's message adds why the planner told it to stop, once it was
// told, to what its agent says.
func TestTaskMessageSaysWhyItStopped(t *testing.T) {
	for _, tc := range []struct {
		desired TaskState
		status  string
		reason  string
		want    string
	}{
		{TaskRunning, "", "", ""},
		{TaskRunning, "restarting in 1s", "", "restarting in 1s"},
		{TaskShutdown, "stopped", "", "stopped"},
		{TaskShutdown, "stopped", "scaled down", "stopped (scaled down)"},
		{TaskShutdown, "", "evicted by taint k:NoExecute", "evicted by taint k:NoExecute"},
		// A task never placed: the planner wrote its reason as its status.
		{TaskShutdown, "scaled down", "scaled down", "scaled down"},
		// A task running again (its slot's new spec) keeps no old reason.
		{TaskRunning, "", "scaled down", ""},
	} {
		task := &Task{Spec: TaskSpec{DesiredState: tc.desired, StopReason: tc.reason}, Status: TaskStatus{Message: tc.status}}
		if got := task.Message(); got != tc.want {
			t.Errorf("desired %s, status %q, reason %q: %q, want %q", tc.desired, tc.status, tc.reason, got, tc.want)
		}
	}
}
