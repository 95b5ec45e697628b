package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/server"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/internal/testpoll"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// revocationBound is how soon a revocation must end a stream opened
// before it (9).
const revocationBound = 5 * time.Second

// nodeConn is a connection to addr presenting creds, as an agent's.
func nodeConn(t *testing.T, addr string, creds *pki.Credentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// registerWithLeader registers the node of creds as its agent does:
// with the leader, going to whichever manager leads at each try.
func registerWithLeader(ctx context.Context, t *testing.T, c *testcluster.Cluster, creds *pki.Credentials) error {
	t.Helper()
	conns := map[string]*grpc.ClientConn{}
	return testpoll.WhileUnavailable(ctx, func() error {
		addr := c.WaitLeader().Addr
		if conns[addr] == nil {
			conns[addr] = nodeConn(t, addr, creds)
		}
		return register(ctx, conns[addr])
	})
}

func register(ctx context.Context, conn *grpc.ClientConn) error {
	data, _ := json.Marshal(legion.NodeStatus{Addr: "127.0.0.1"})
	return testpoll.WhileUnavailable(ctx, func() error {
		_, err := pb.NewDispatcherClient(conn).Register(ctx, &pb.RegisterRequest{Status: data})
		return err
	})
}

// refusedAsRemoved checks err is the refusal of a removed node's
// certificate.
func refusedAsRemoved(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "was removed from the cluster") {
		t.Errorf("%s: %v, want PERMISSION_DENIED saying the node was removed", what, err)
	}
}

// A worker whose Node is deleted is refused everywhere with the
// certificate it held: its open Assignments and Sessions streams end
// within 5 s, its calls and renewals are refused, also after a restart;
// joining again with a token gives it a certificate that is let in, while
// the old one stays refused.
func TestRemovedWorkerIsRefusedUntilItJoinsAgain(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Workers: 1})
	mgr, w := c.Managers[0], c.Workers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := w.Server.Credentials()
	conn := nodeConn(t, mgr.Addr, old)
	if err := register(ctx, conn); err != nil {
		t.Fatalf("registering before the removal: %v", err)
	}
	assign, err := pb.NewDispatcherClient(conn).Assignments(ctx, &pb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assign.Recv(); err != nil {
		t.Fatalf("the first assignments: %v", err)
	}
	sess, err := pb.NewSessionsClient(conn).Sessions(ctx, &pb.SessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Recv(); err != nil {
		t.Fatalf("the sessions stream's first offer: %v", err)
	}

	if _, err := c.Client().Delete(ctx, legion.KindNode, "", w.Server.NodeID(), nil); err != nil {
		t.Fatalf("deleting the worker's Node: %v", err)
	}
	removed := time.Now()
	ended := make(chan error, 2)
	go func() {
		for {
			if _, err := assign.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	go func() {
		for {
			if _, err := sess.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	for range 2 {
		select {
		case err := <-ended:
			refusedAsRemoved(t, "an open stream", err)
		case <-time.After(revocationBound - time.Since(removed)):
			t.Fatalf("a stream opened before the removal still open %s after it", revocationBound)
		}
	}
	refusedAsRemoved(t, "register", register(ctx, conn))
	_, err = pb.NewDispatcherClient(conn).Heartbeat(ctx, &pb.HeartbeatRequest{})
	refusedAsRemoved(t, "heartbeat", err)
	_, csr := dispatchertest.NewCSR(t, w.Server.NodeID())
	_, err = pb.NewDispatcherClient(conn).Renew(ctx, &pb.RenewRequest{Csr: csr})
	refusedAsRemoved(t, "renew", err)
	if _, _, err := mgr.Store().Get(legion.KindNode, "", w.Server.NodeID()); err == nil {
		t.Error("the removed worker's Node is back")
	}

	// Restarted, it presents the same certificate and is refused.
	w.Restart()
	refusedAsRemoved(t, "register after a restart", register(ctx, nodeConn(t, mgr.Addr, w.Server.Credentials())))

	// Its pki/ moved aside, as the daemon's exit says (its node id, role
	// file and images kept), it joins again.
	w.Stop()
	if err := os.Rename(filepath.Join(w.Dir, server.PKIDir), filepath.Join(w.Dir, server.PKIDir+".old")); err != nil {
		t.Fatal(err)
	}
	w.Restart()
	if _, err := w.Bare().JoinCluster(ctx, c.Token("worker"), mgr.Addr, "worker"); err != nil {
		t.Fatalf("joining again with a token: %v", err)
	}
	fresh := nodeConn(t, mgr.Addr, w.Server.Credentials())
	if err := register(ctx, fresh); err != nil {
		t.Fatalf("the rejoined worker registering: %v", err)
	}
	if _, err := pb.NewDispatcherClient(fresh).Heartbeat(ctx, &pb.HeartbeatRequest{}); err != nil {
		t.Fatalf("the rejoined worker's heartbeat: %v", err)
	}
	refusedAsRemoved(t, "the old certificate after the new join", register(ctx, nodeConn(t, mgr.Addr, old)))
}
