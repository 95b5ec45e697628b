package daemon

import (
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// Autoscaling end to end: the node samples what its tasks use, the
// planner reads it and grows the service at once when its tasks use more
// than the target (here: memory far above a 1 MiB request), up to max.
func TestServiceAutoscalesOnWhatItsTasksUse(t *testing.T) {
	n := startNode(t)
	n.apply(t, testPod("Service", "auto", "web", listen8080, "replicas: 1", "autoscale: {min: 1, max: 3, memory: 50}")+
		`        resources: {requests: {memory: 1Mi}}
`+servesHTTP("100ms"))
	poll(t, "the service grown to its max", 60*time.Second, func() bool {
		return readyTasks(n.tasksOf(t, "legion.service", "auto")) == 3
	})
	o, _, err := n.st.Get(legion.KindService, "default", "auto")
	if err != nil {
		t.Fatal(err)
	}
	st := o.(*legion.Service).Status
	if st.Autoscale == nil || st.Autoscale.Replicas != 3 || st.Replicas != 3 {
		t.Fatalf("service status %+v (autoscale %+v), want 3 replicas wanted by the autoscaler", st, st.Autoscale)
	}
	// Never past max.
	if got := len(n.tasksOf(t, "legion.service", "auto")); got != 3 {
		t.Fatalf("%d tasks, want max 3", got)
	}
}
