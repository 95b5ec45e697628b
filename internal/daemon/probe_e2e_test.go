package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/jail"
)

var probedService = testPod("Service", "probed", "web", listen8080, "replicas: 1") +
	`        ports: [{name: http, containerPort: 8080}]
        probes:
          readiness: {http: {path: /ready, port: http}, period: 100ms, failureThreshold: 1}
          liveness: {http: {path: /live, port: http}, period: 100ms, failureThreshold: 3}
    restartPolicy: {condition: any, delay: 1s}
` + endpointHTTP

func (n *node) inContainer(t *testing.T, task *legion.Task, args ...string) {
	t.Helper()
	id := task.Metadata.UID + "-web"
	code, err := n.rt.Exec(context.Background(), id, jail.ExecSpec{Command: append([]string{"/app/server"}, args...)})
	if err != nil || code != 0 {
		// What the task says now tells a restart (and why) from a fault.
		var now legion.TaskStatus
		if o, _, gerr := n.st.Get(legion.KindTask, task.Metadata.Namespace, task.Metadata.Name); gerr == nil {
			now = o.(*legion.Task).Status
		}
		t.Fatalf("exec %v in %s: %d, %v (the task now: %s ready=%v restarts=%d %q)", args, id, code, err, now.State, now.Ready, now.Restarts, now.Message)
	}
}

func (n *node) pid(t *testing.T, task *legion.Task) int {
	t.Helper()
	st, err := n.rt.Inspect(context.Background(), task.Metadata.UID+"-web")
	if err != nil {
		t.Fatal(err)
	}
	return st.Pid
}

// A readiness failure takes the task out of the endpoints without a
// restart; a liveness failure restarts the container, with the backoff
// said in the task's message.
func TestProbesDriveReadinessAndRestarts(t *testing.T) {
	n := startNode(t)
	n.apply(t, probedService)
	var task *legion.Task
	poll(t, "a ready task", 60*time.Second, func() bool {
		ts := n.tasksOf(t, "legion.service", "probed")
		if readyTasks(ts) == 1 {
			task = ts[0]
			return true
		}
		return false
	})
	pid := n.pid(t, task)

	n.inContainer(t, task, "-touch", "/tmp/unready")
	poll(t, "the task not ready", 20*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "probed")) == 0 })
	if got := n.pid(t, task); got != pid {
		t.Fatalf("a readiness failure restarted the container (pid %d -> %d)", pid, got)
	}
	n.inContainer(t, task, "-rm", "/tmp/unready")
	poll(t, "the task ready again", 20*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "probed")) == 1 })

	n.inContainer(t, task, "-touch", "/tmp/dead")
	var sawBackoff bool
	poll(t, "the container restarted after failing liveness", 30*time.Second, func() bool {
		cur := n.tasksOf(t, "legion.service", "probed")[0]
		if strings.Contains(cur.Status.Message, "restarting in 1s (attempt 1)") {
			sawBackoff = true
		}
		st, err := n.rt.Inspect(context.Background(), task.Metadata.UID+"-web")
		return err == nil && st.State == jail.StateRunning && st.Pid != pid && cur.Status.Restarts >= 1
	})
	cur := n.tasksOf(t, "legion.service", "probed")[0]
	if cur.Metadata.UID != task.Metadata.UID {
		t.Fatalf("the task was replaced (%s -> %s); the container should restart within it", task.Metadata.Name, cur.Metadata.Name)
	}
	if !sawBackoff && !strings.Contains(cur.Status.Message, "restarting") {
		t.Logf("note: the backoff message was not caught between polls; last message %q", cur.Status.Message)
	}
	_ = agent.LabelNode
}
