package sessions_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// revocationBound is how soon a session must end once its user's
// binding goes (9).
const revocationBound = 5 * time.Second

// A user's open logs and port-forward sessions end, saying why, within
// 5 s of the RoleBinding that allowed them being deleted; the cluster
// admin's stay open.
func TestUserSessionsEndWhenTheBindingGoes(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	port := echoServer(t)
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	withIP(t, m, task, "127.0.0.1")
	a.Pods.Set(task.Metadata.UID, "127.0.0.1")
	a.Logs.Append(task.Metadata.UID+"-app", rec(1, "stdout", "first"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = "gil", "shop"
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "gil", Role: legion.RoleEdit}
	if _, _, err := m.Store.Put(ctx, b, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	gil, _ := dispatchertest.Issue(t, m.CA, "gil", pki.RoleUser)

	open := func(creds *pki.Credentials) (logs, forward chan error) {
		logs, forward = make(chan error, 1), make(chan error, 1)
		req := target("Task", "web.1", "app")
		req.Follow = true
		ls, err := dial(t, m, creds).Logs(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ls.Recv(); err != nil { // the frame naming the task
			t.Fatalf("logs: %v", err)
		}
		go func() {
			for {
				if _, err := ls.Recv(); err != nil {
					logs <- err
					return
				}
			}
		}()
		pf, err := dial(t, m, creds).PortForward(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := pf.Send(&legionpb.PortForwardInput{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Port: int32(port)}); err != nil {
			t.Fatal(err)
		}
		if _, err := pf.Recv(); err != nil {
			t.Fatalf("port-forward: %v", err)
		}
		go func() {
			for {
				if _, err := pf.Recv(); err != nil {
					forward <- err
					return
				}
			}
		}()
		return logs, forward
	}
	userLogs, userForward := open(gil)
	adminLogs, adminForward := open(m.Admin)

	if _, err := m.Store.Delete(ctx, legion.KindRoleBinding, "shop", "gil", store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	for _, s := range []struct {
		what  string
		ended chan error
	}{{"logs", userLogs}, {"port-forward", userForward}} {
		select {
		case err := <-s.ended:
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), s.what+" ended") || !strings.Contains(err.Error(), "user gil has no role in namespace shop") {
				t.Errorf("gil's %s ended with %v, want PERMISSION_DENIED saying why", s.what, err)
			}
		case <-time.After(revocationBound - time.Since(removed)):
			t.Fatalf("gil's %s still open %s after the binding went", s.what, revocationBound)
		}
	}
	select {
	case err := <-adminLogs:
		t.Errorf("the admin's logs ended: %v", err)
	case err := <-adminForward:
		t.Errorf("the admin's port-forward ended: %v", err)
	default:
	}
	cancel()
	<-adminLogs
	<-adminForward
}

// A user's logs, exec or port-forward in a namespace where they have no
// role is refused before the target is looked up: the refusal is the same
// for a task that runs there, a container it lacks and a name nothing
// has, so it tells the user nothing of what another team runs.
func TestSessionRefusalsSayNothingOfTheNamespace(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	m.StartAgent(t, "n1")
	m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = "mallory", "evil"
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "mallory", Role: legion.RoleEdit}
	if _, _, err := m.Store.Put(ctx, b, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	mallory, _ := dispatchertest.Issue(t, m.CA, "mallory", pki.RoleUser)
	c := dial(t, m, mallory)
	for _, tg := range []*legionpb.Target{
		{Namespace: "shop", Name: "web.1"},
		{Namespace: "shop", Name: "web.1", Container: "nope"},
		{Namespace: "shop", Name: "nothere"},
		{Namespace: "shop", Kind: "Job", Name: "nothere"},
	} {
		for _, s := range []struct {
			what string
			run  func() error
		}{
			{"logs", func() error {
				ls, err := c.Logs(ctx, &legionpb.LogsRequest{Target: tg})
				if err == nil {
					_, err = ls.Recv()
				}
				return err
			}},
			{"exec", func() error {
				_, err := execute(t, c, &legionpb.ExecStart{Target: tg, Command: []string{"true"}})
				return err
			}},
			{"port-forward", func() error {
				pf, err := c.PortForward(ctx)
				if err == nil {
					if err = pf.Send(&legionpb.PortForwardInput{Target: tg, Port: 80}); err == nil || errors.Is(err, io.EOF) {
						_, err = pf.Recv()
					}
				}
				return err
			}},
		} {
			err := s.run()
			want := s.what + ": user mallory has no role in namespace shop"
			if status.Code(err) != codes.PermissionDenied || !strings.HasPrefix(status.Convert(err).Message(), want) {
				t.Errorf("%s of %v by a user with no role in its namespace: got %v, want PERMISSION_DENIED %q...", s.what, tg, err, want)
			}
		}
	}
}
