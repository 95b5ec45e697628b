package sessions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// openSessions opens a Sessions stream with creds asking for node and
// returns the error of its first message (nil once the manager took it).
func openSessions(t *testing.T, m *sessionstest.Manager, creds *pki.Credentials, node string) error {
	t.Helper()
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := legionpb.NewSessionsClient(conn).Sessions(ctx, &legionpb.SessionsRequest{Node: node})
	if err == nil {
		_, err = st.Recv()
	}
	return err
}

// A certificate signed for a node's name but not recorded as the node's
// cannot take over the node's sessions stream, nor can a manager's take a
// node that holds its own certificate: an admin's exec still reaches the
// node's own agent.
func TestSessionsStreamStaysWithItsNode(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{Kind: legion.KindService, Name: "web"}, "app")

	forged, _ := dispatchertest.Issue(t, m.CA, "n1", pki.RoleWorker)
	if err := openSessions(t, m, forged, ""); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "issued to node n1") {
		t.Errorf("a certificate not issued to n1: %v, want PermissionDenied naming n1", err)
	}
	mgr, _ := dispatchertest.Issue(t, m.CA, "m9", pki.RoleManager)
	dispatchertest.Record(t, m.Store, mgr)
	if err := openSessions(t, m, mgr, "n1"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("a manager asking for n1, which holds its own certificate: %v, want PermissionDenied", err)
	}

	r, err := execute(t, dial(t, m, m.Admin), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"cat"}, Stdin: true}, "still n1")
	if err != nil {
		t.Fatalf("exec on n1 after the attempts: %v", err)
	}
	if r.stdout != "still n1" || r.node != "n1" {
		t.Fatalf("exec on n1: %+v", r)
	}
	if calls := a.Execs.Calls(); len(calls) != 1 || calls[0] != task.Metadata.UID+"-app: cat" {
		t.Errorf("execs on n1's own agent: %q", calls)
	}
}

// For a node with no certificate on record nothing tells its certificates
// apart, so a stream under another certificate does not replace the one
// open.
func TestUnrecordedNodesStreamIsNotReplacedByAnotherCertificate(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	m.StartUnrecordedAgent(t, "n2")
	other, _ := dispatchertest.Issue(t, m.CA, "n2", pki.RoleWorker)
	if err := openSessions(t, m, other, ""); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a second certificate of unrecorded n2: %v, want AlreadyExists", err)
	}
	if !m.Pods.Connected("n2") {
		t.Error("n2's own stream is gone")
	}
}

// An agent whose sessions stream ends after an offer reached it, before
// it attached, fails the session at once as dropped, rather than when
// the wait for its answer runs out (AttachTimeout, 5 s here).
func TestSessionDroppedBeforeItsAttach(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	creds, _ := dispatchertest.Issue(t, m.CA, "n1", pki.RoleWorker)
	dispatchertest.Record(t, m.Store, creds)
	m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{Kind: legion.KindService, Name: "web"}, "app")
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sctx, cut := context.WithCancel(context.Background())
	t.Cleanup(cut)
	st, err := legionpb.NewSessionsClient(conn).Sessions(sctx, &legionpb.SessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the manager took the stream
		t.Fatal(err)
	}
	offered := make(chan error, 1)
	go func() {
		o, err := st.Recv()
		if err == nil && o.GetId() == "" {
			err = fmt.Errorf("an offer without an id: %v", o)
		}
		cut() // the node goes, without attaching
		offered <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, err := dial(t, m, m.Admin).Logs(ctx, target("", "web.1", ""))
	if err == nil {
		_, err = ls.Recv()
	}
	if oerr := <-offered; oerr != nil {
		t.Fatalf("the node's stream: %v", oerr)
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "the agent of node n1 dropped the session before it attached") {
		t.Fatalf("logs of a task whose node went after the offer: %v, want Unavailable saying the agent dropped the session", err)
	}
}
