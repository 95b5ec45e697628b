package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

func rolling(order, name, failure string) string {
	return rollingWith(order, name, failure, "1s", "")
}

func rollingWith(order, name, failure, monitor, restart string) string {
	return testPod("Service", "roll", "web", `[-listen, "$(LEGION_POD_IP):8080"`+failure+`]`, "replicas: 3") +
		`        env: [{name: NAME, value: "` + name + `"}]
` + servesHTTP("100ms") + restart + endpointHTTP +
		`  update: {order: ` + order + `, parallelism: 1, monitor: ` + monitor + `, failureAction: rollback}
`
}

// hammer sends requests through the VIP until stopped, counting answers
// by body and failures.
type hammer struct {
	failures atomic.Int64
	mu       sync.Mutex
	seen     map[string]int
	stop     chan struct{}
	done     chan struct{}
}

func startHammer(addr string) *hammer {
	h := &hammer{seen: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(h.done)
		for {
			select {
			case <-h.stop:
				return
			default:
			}
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				h.failures.Add(1)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				h.failures.Add(1)
				continue
			}
			h.mu.Lock()
			h.seen[strings.TrimSpace(string(body))]++
			h.mu.Unlock()
			time.Sleep(5 * time.Millisecond) // pace, not a wait
		}
	}()
	return h
}

func (h *hammer) end() { close(h.stop); <-h.done }

func (n *node) vipAddr(t *testing.T, svc string) string {
	t.Helper()
	poll(t, "a VIP", 10*time.Second, func() bool { return n.service(t, svc).Status.VIP != "" })
	vip := n.service(t, svc).Status.VIP
	return net.JoinHostPort(LocalAddr(netip.MustParseAddr(vip), n.vipOctet).String(), "80")
}

func runningWith(n *node, t *testing.T, svc, name string) int {
	count := 0
	for _, task := range n.tasksOf(t, "legion.service", svc) {
		if task.Spec.DesiredState == legion.TaskRunning && task.Status.Ready &&
			task.Spec.Pod.Containers[0].Env[0].Value == name {
			count++
		}
	}
	return count
}

// A start-first rolling update replaces every task while a client keeps
// sending requests through the VIP, and not one fails.
func TestStartFirstRollingUpdateLosesNoRequest(t *testing.T) {
	n := startNode(t)
	n.apply(t, rolling("start-first", "v1", ""))
	poll(t, "three v1 tasks ready", 60*time.Second, func() bool { return runningWith(n, t, "roll", "v1") == 3 })
	addr := n.vipAddr(t, "roll")
	poll(t, "the VIP answering", 10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	h := startHammer(addr)
	n.apply(t, rolling("start-first", "v2", ""))
	poll(t, "three v2 tasks ready", 90*time.Second, func() bool {
		return runningWith(n, t, "roll", "v2") == 3 && runningWith(n, t, "roll", "v1") == 0
	})
	poll(t, "the update completed", 30*time.Second, func() bool {
		u := n.service(t, "roll").Status.Update
		return u != nil && u.State == legion.UpdateCompleted
	})
	h.end()
	if f := h.failures.Load(); f != 0 {
		t.Fatalf("%d requests failed during a start-first update (answers: %v)", f, h.seen)
	}
	if h.seen["v1"] == 0 || h.seen["v2"] == 0 {
		t.Fatalf("answers %v: want both versions seen through the VIP", h.seen)
	}
}

// A stop-first update also replaces every task.
func TestStopFirstRollingUpdateReplacesEveryTask(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.apply(t, rolling("stop-first", "v1", ""))
	poll(t, "three v1 tasks ready", 60*time.Second, func() bool { return runningWith(n, t, "roll", "v1") == 3 })
	n.apply(t, rolling("stop-first", "v2", ""))
	poll(t, "three v2 tasks ready and no v1", 90*time.Second, func() bool {
		return runningWith(n, t, "roll", "v2") == 3 && runningWith(n, t, "roll", "v1") == 0
	})
}

// An update whose new tasks fail within the monitor window is rolled back
// to the old spec, with failureAction rollback: with a limited restart
// policy the task fails; with the default one the agent restarts the
// container within the task, and that restart counts as the failure.
func TestFailingUpdateRollsBack(t *testing.T) {
	t.Parallel()
	for name, restart := range map[string]string{"limited": "    restartPolicy: {condition: any, maxAttempts: 1}\n", "unlimited": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			failingUpdateRollsBack(t, restart)
		})
	}
}

func failingUpdateRollsBack(t *testing.T, restart string) {
	n := startNode(t)
	n.apply(t, rollingWith("stop-first", "v1", "", "10s", restart))
	poll(t, "three v1 tasks ready", 60*time.Second, func() bool { return runningWith(n, t, "roll", "v1") == 3 })
	n.apply(t, rollingWith("stop-first", "broken", `, -exit, "1"`, "10s", restart))
	defer func() {
		if t.Failed() {
			s := n.service(t, "roll")
			t.Logf("spec env %s update %+v", s.Spec.Pod.Containers[0].Env[0].Value, s.Status.Update)
			for _, task := range n.tasksOf(t, "legion.service", "roll") {
				t.Logf("task %s desired=%s %s ready=%v restarts=%d msg=%q env=%s", task.Metadata.Name, task.Spec.DesiredState, task.Status.State, task.Status.Ready, task.Status.Restarts, task.Status.Message, task.Spec.Pod.Containers[0].Env[0].Value)
			}
		}
	}()
	poll(t, "the update rolled back", 90*time.Second, func() bool {
		s := n.service(t, "roll")
		return s.Status.Update != nil && s.Status.Update.State == legion.UpdateRolledBack &&
			s.Spec.Pod.Containers[0].Env[0].Value == "v1" && runningWith(n, t, "roll", "v1") == 3
	})
	_ = context.Background
}
