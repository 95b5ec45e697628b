package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/jail/process"
)

// A worker removed from the cluster while it runs a task hears it from
// the managers' refusal of its certificate: the task is the cluster's to
// run elsewhere now, so the worker's pods stop and its agent ends saying
// why, rather than running on unheard and asking again every second.
func TestARemovedWorkerStopsItsPodsAndEnds(t *testing.T) {
	t.Parallel()
	a, cl := workerRunningWeb(t)
	worker := a.w.Server.NodeID()
	ctx := context.Background()
	if _, err := cl.Delete(ctx, legion.KindNode, "", worker, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-a.done:
		a.cancel()
		a.cancel = nil // ended: nothing for the cleanup to stop
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's agent still runs 30s after the node was removed")
	}
	if err == nil || !strings.Contains(err.Error(), "node "+worker+" was removed from the cluster at ") ||
		!strings.Contains(err.Error(), "pods were stopped") || !strings.Contains(err.Error(), "to join again, move "+filepath.Join(a.w.Dir, "pki")+" aside (the certificates refused), start the daemon and run legion join") {
		t.Fatalf("the agent ended with %v, want the removal and that its pods were stopped", err)
	}
	rt, err := process.New(process.Config{DataDir: a.w.Dir, Shim: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Wait()
	left, err := rt.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d containers left on the removed worker, want none", len(left))
	}
}

// A worker removed while its daemon was down hears it when the daemon
// starts again: its registration is refused, and the pods it left
// running, whose tasks the managers gave to other nodes meanwhile, stop
// before it ends saying why.
func TestAWorkerRemovedWhileDownStopsItsPodsAtStart(t *testing.T) {
	t.Parallel()
	a, cl := workerRunningWeb(t)
	worker := a.w.Server.NodeID()
	ctx := context.Background()
	a.stop() // the daemon goes; its pods run on
	rt, err := process.New(process.Config{DataDir: a.w.Dir, Shim: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Wait()
	if left, err := rt.List(ctx, nil); err != nil || len(left) == 0 {
		t.Fatalf("%d containers left running by the stopped daemon (%v), want its pod", len(left), err)
	}
	if _, err := cl.Delete(ctx, legion.KindNode, "", worker, nil); err != nil {
		t.Fatal(err)
	}
	a.start()
	select {
	case err = <-a.done:
		a.cancel()
		a.cancel = nil
	case <-time.After(30 * time.Second):
		t.Fatal("the removed worker's daemon still runs 30s after it started again")
	}
	if err == nil || !strings.Contains(err.Error(), "node "+worker+" was removed from the cluster at ") ||
		!strings.Contains(err.Error(), "pods this node still ran were stopped") || !strings.Contains(err.Error(), "to join again, move "+filepath.Join(a.w.Dir, "pki")+" aside") {
		t.Fatalf("the daemon ended with %v, want the removal and that its pods were stopped", err)
	}
	left, err := rt.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d containers left on the removed worker, want none", len(left))
	}
}

// workerRunningWeb starts a cluster of a manager and a worker with its
// agent, and a service of one task, ready on the worker.
func workerRunningWeb(t *testing.T) (*workerAgent, *client.Client) {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Leader: true, Workers: 1})
	a := startWorkerAgents(t, c)[0]
	worker := a.w.Server.NodeID()
	cl := c.Client()
	applyManifest(t, cl, strings.Replace(webService, "replicas: 3", "replicas: 1", 1))
	poll(t, "a ready task of web on the worker", 60*time.Second, func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range ts {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "web" && tk.Spec.Node == worker && tk.Status.Ready {
				return true
			}
		}
		return false
	})
	return a, cl
}
