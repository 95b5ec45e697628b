package daemon

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
	"github.com/legionbsd/legion/internal/scale"
)

// simNode is a worker node with no pods, in the benchmark's process: it
// joins with the worker token, registers and sends heartbeats through a
// real dispatcher session (mutual TLS), and reports every task it is
// told to run running and ready at once (as internal/scale's agents do),
// so a cluster holds more tasks than one node's pod range.
type simNode struct {
	sess *dispatcherclient.Session
	done chan struct{}
}

func startSimNode(t testing.TB, u *upProcess, name string) *simNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tok, err := u.cl.Token(ctx, "worker")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := scale.Join(ctx, u.api, tok, name)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := dispatcherclient.New(dispatcherclient.Config{Node: name, Managers: []string{u.api}, TLS: creds.ClientConfig(),
		Status: func() legion.NodeStatus {
			capacity := legion.ResourceRequests{CPU: 64_000, Memory: 256 << 30}
			return legion.NodeStatus{State: legion.NodeReady, Hostname: name, Addr: "192.0.2.1",
				Platform:  legion.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Linux: runtime.GOOS == "linux"},
				Resources: legion.NodeResources{Capacity: capacity, Allocatable: capacity}, Version: "sim", ImagePins: true}
		}})
	if err != nil {
		t.Fatal(err)
	}
	s := &simNode{sess: sess, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); sess.Close(); <-s.done })
	if err := sess.Start(ctx); err != nil {
		close(s.done)
		t.Fatalf("node %s: %v", name, err)
	}
	ch, err := sess.Assignments(ctx)
	if err != nil {
		close(s.done)
		t.Fatal(err)
	}
	go func() { defer close(s.done); s.run(ctx, ch) }()
	return s
}

// run reports what each assignment set asks that was not reported yet.
func (s *simNode) run(ctx context.Context, ch <-chan agent.Assignments) {
	sent := map[string]legion.TaskState{} // by task uid
	next := 0
	for as := range ch {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, t := range as.Tasks {
			var st legion.TaskStatus
			now := time.Now()
			switch {
			case t.Spec.DesiredState == legion.TaskRunning && t.Status.State != legion.TaskRunning:
				next++
				st = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: fmt.Sprintf("10.99.%d.%d", next/250, next%250+2), Started: &now, Timestamp: now}
			case t.Spec.DesiredState != legion.TaskRunning && !t.Status.State.Terminal():
				st = legion.TaskStatus{State: legion.TaskShutdown, Finished: &now, Timestamp: now}
			default:
				continue
			}
			if sent[t.Metadata.UID] == st.State {
				continue // the set is older than the report
			}
			sent[t.Metadata.UID] = st.State
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				for s.sess.Report(ctx, t.Metadata.Namespace, t.Metadata.Name, t.Metadata.UID, st) != nil {
					select {
					case <-ctx.Done():
						return
					case <-time.After(200 * time.Millisecond): // a failed report is sent again
					}
				}
			}()
		}
		wg.Wait()
	}
}
