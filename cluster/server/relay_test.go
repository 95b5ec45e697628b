package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
)

// A worker's heartbeats and reports sent to a follower reach the leader
// (spec 3.2): a worker that can reach every manager but the leader stays
// alive. A worker cannot use the forwarded mark to speak for another node.
func TestFollowerRelaysHeartbeatsAndReportsToTheLeader(t *testing.T) {
	t.Parallel()
	m, f, w, _ := twoManagersAndAWorker(t)
	dial := func(addr string, creds *pki.Credentials) pb.DispatcherClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewDispatcherClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	viaFollower := dial(f.addr, w.s.Credentials())
	node := w.s.NodeID()
	before := m.s.disp.Heartbeats()[node]
	resp, err := viaFollower.Heartbeat(ctx, &pb.HeartbeatRequest{})
	if err != nil {
		t.Fatalf("heartbeat through the follower: %v", err)
	}
	if resp.GetLeader() == "" {
		t.Errorf("the relayed answer names no leader: %+v", resp)
	}
	if after := m.s.disp.Heartbeats()[node]; !after.After(before) {
		t.Errorf("the leader did not record the heartbeat relayed by the follower (before %v, after %v)", before, after)
	}
	// On the heartbeat stream, each beat is relayed as it comes.
	beats, err := viaFollower.HeartbeatStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		before := m.s.disp.Heartbeats()[node]
		if err := beats.Send(&pb.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		if resp, err := beats.Recv(); err != nil || resp.GetLeader() == "" {
			t.Fatalf("beat %d on the stream through the follower: %+v, %v", i, resp, err)
		}
		if after := m.s.disp.Heartbeats()[node]; !after.After(before) {
			t.Errorf("beat %d on the stream: the leader did not record it (before %v, after %v)", i, before, after)
		}
	}
	// A report of a task that is not there: the leader's answer (not
	// found), not the follower's refusal.
	_, err = viaFollower.Report(ctx, &pb.ReportRequest{Namespace: "default", Name: "no-such-task", Status: []byte(`{}`)})
	if status.Code(err) != codes.NotFound {
		t.Errorf("report through the follower: %v, want the leader's NotFound", err)
	}
	// The worker marks its own call forwarded to speak for the follower
	// manager: refused, and nothing recorded for that node.
	other := f.s.NodeID()
	fake := metadata.AppendToOutgoingContext(ctx, pb.ForwardedKey, node)
	_, err = dial(m.addr, w.s.Credentials()).Heartbeat(fake, &pb.HeartbeatRequest{Node: other})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a worker's forged relay for %s: %v, want PermissionDenied", other, err)
	}
	forgedStream, err := dial(m.addr, w.s.Credentials()).HeartbeatStream(fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := forgedStream.Send(&pb.HeartbeatRequest{Node: other}); err != nil {
		t.Fatal(err)
	}
	if _, err := forgedStream.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a worker's forged relay on the heartbeat stream for %s: %v, want PermissionDenied", other, err)
	}
	if _, heard := m.s.disp.Heartbeats()[other]; heard {
		t.Errorf("the leader recorded a heartbeat for %s from a worker's forged relay", other)
	}
}
