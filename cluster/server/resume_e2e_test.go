package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc"
)

// A manager's dispatcher follows its replica from when it becomes a
// manager (init, join), not from its first stream: an agent's stream
// that moves to a manager that has served none yet goes on from the point
// the last one reached, with what changed since, rather than a whole set.
func TestStreamResumesOnAManagerThatServedNone(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2, Workers: 1})
	leader := c.WaitLeader()
	streamMovesAndResumes(t, c, leader, c.Followers(leader)[0])
}

// The same for a manager restarted over its directory, whose store opens
// before its dispatcher is made (the other order from a join's).
func TestStreamResumesOnAManagerRestartedOverItsDirectory(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2, Workers: 1})
	restarted := c.Followers(c.WaitLeader())[0]
	restarted.Restart()
	c.WaitLeader() // the restart may have cost the leader its quorum
	streamMovesAndResumes(t, c, c.Followers(restarted)[0], restarted)
}

// streamMovesAndResumes registers the cluster's worker through the
// leader, takes the first message of its stream on from, assigns it a
// task while it follows none, and checks that its stream on to, resuming
// from that message, brings the task as a change and no whole set.
func streamMovesAndResumes(t *testing.T, c *testcluster.Cluster, from, to *testcluster.Manager) {
	t.Helper()
	w := c.Workers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(m *testcluster.Manager, version, term uint64) (grpc.ServerStreamingClient[pb.AssignmentSet], context.CancelFunc) {
		t.Helper()
		conn := nodeConn(t, m.Addr, w.Server.Credentials())
		sctx, stop := context.WithCancel(ctx)
		s, err := pb.NewDispatcherClient(conn).Assignments(sctx, &pb.AssignmentsRequest{
			Deltas: true, EndpointTasks: true, SharedChanges: true, TypedValues: true, ResumeVersion: version, ResumeTerm: term})
		if err != nil {
			stop()
			t.Fatal(err)
		}
		return s, stop
	}
	recv := func(s grpc.ServerStreamingClient[pb.AssignmentSet]) *pb.AssignmentSet {
		t.Helper()
		set, err := s.Recv()
		if err != nil {
			t.Fatalf("assignments: %v", err)
		}
		return set
	}

	if err := registerWithLeader(ctx, t, c, w.Server.Credentials()); err != nil {
		t.Fatal(err)
	}
	s, stop := open(from, 0, 0)
	first := recv(s)
	if first.GetDelta() || first.GetTerm() == 0 {
		t.Fatalf("a session's first message: delta %v, term %d; want a whole set naming its term", first.GetDelta(), first.GetTerm())
	}
	stop()

	// While the node follows no stream, a task is assigned to it.
	task := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Name: "web-1", Namespace: legion.DefaultNamespace}}}
	task.Spec.Node = w.Server.NodeID()
	task.Spec.DesiredState = legion.TaskRunning
	task.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1"}}
	if _, _, err := c.WaitLeader().Store().Put(ctx, task, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	// to may apply the task after the stream begins: the task comes in
	// the first message or a later one, each of them changes.
	s, stop = open(to, first.GetVersion(), first.GetTerm())
	defer stop()
	for {
		next := recv(s)
		if !next.GetDelta() {
			t.Fatalf("the stream on the other manager sent a whole set (%d tasks) at version %d, resuming from %d: "+
				"its dispatcher did not follow the store from its opening", len(next.GetTasks()), next.GetVersion(), first.GetVersion())
		}
		for _, it := range next.GetTaskChanges().GetPut() {
			if it.GetKey() != legion.DefaultNamespace+"\x00web-1" {
				t.Fatalf("the resumed stream put task %q, want only the task assigned meanwhile", it.GetKey())
			}
			return
		}
	}
}
