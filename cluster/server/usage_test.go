package server

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testpoll"
)

// Cluster.Usage answers, at a follower too, what the leader heard in the
// nodes' heartbeats, for tasks still placed on the node that reported
// them, and keeps from a user the namespaces it may not read tasks in.
func TestUsageFromHeartbeatsForwardedAndFiltered(t *testing.T) {
	t.Parallel()
	m, f, w, admin := twoManagersAndAWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := admin.Apply(ctx, []legion.Object{namespaceObj("shop"), namespaceObj("lab"), roleBinding("shop", "vera", legion.RoleView)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	node := w.s.NodeID()
	put := func(ns, name, on string) {
		task, _ := legion.New(legion.KindTask)
		task.GetMetadata().Namespace, task.GetMetadata().Name = ns, name
		task.(*legion.Task).Spec = legion.TaskSpec{Node: on, DesiredState: legion.TaskRunning,
			Pod: legion.PodSpec{Containers: []legion.Container{{Name: "app", Image: "example/app:1"}}}}
		if _, _, err := m.s.store().Put(ctx, task, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("shop", "web-1", node)
	put("lab", "db-1", node)
	put("shop", "moved-1", "elsewhere") // placed on another node since
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(w.s.Credentials().ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := testpoll.WhileUnavailable(ctx, func() error {
		_, err := pb.NewDispatcherClient(conn).Heartbeat(ctx, &pb.HeartbeatRequest{Usage: []*pb.TaskUsage{
			{Namespace: "shop", Task: "web-1", CpuMillis: 250, MemoryBytes: 64 << 20},
			{Namespace: "lab", Task: "db-1", CpuMillis: 1500, MemoryBytes: 1 << 30},
			{Namespace: "shop", Task: "moved-1", CpuMillis: 9, MemoryBytes: 9},
			{Namespace: "shop", Task: "deleted-1", CpuMillis: 9, MemoryBytes: 9},
		}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	type row struct {
		NS, Task, Node string
		CPU            legion.CPU
		Mem            legion.Bytes
	}
	rows := func(us []legion.Usage) []row {
		var out []row
		for _, u := range us {
			if u.Time.IsZero() {
				t.Errorf("usage of %s/%s has no time", u.Namespace, u.Task)
			}
			out = append(out, row{u.Namespace, u.Task, u.Node, u.CPU, u.Memory})
		}
		return out
	}
	got, err := adminClient(t, f.addr, m.dir).Usage(ctx, "")
	if err != nil {
		t.Fatalf("usage at the follower: %v", err)
	}
	want := []row{{"lab", "db-1", node, 1500, 1 << 30}, {"shop", "web-1", node, 250, 64 << 20}}
	if d := cmp.Diff(want, rows(got)); d != "" {
		t.Errorf("admin's usage through the follower (-want +got):\n%s", d)
	}
	vera := userClient(t, admin, f.addr, "vera")
	got, err = vera.Usage(ctx, "")
	if err != nil {
		t.Fatalf("vera's usage: %v", err)
	}
	if d := cmp.Diff(want[1:], rows(got)); d != "" {
		t.Errorf("vera's usage, who reads shop only (-want +got):\n%s", d)
	}
	_, err = vera.Usage(ctx, "lab")
	refused(t, "vera's usage of lab", err, "lab")
}
