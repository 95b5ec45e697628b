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

type execResult struct {
	stdout, stderr string
	code           int
	node           string
}

// execute runs one exec session to its end, sending input first.
func execute(t *testing.T, c legionpb.PodsClient, start *legionpb.ExecStart, input ...string) (execResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Exec(ctx)
	if err != nil {
		return execResult{}, err
	}
	// A stream the server already ended (a refusal) fails Send with
	// io.EOF; its status is what Recv returns.
	send := func(in *legionpb.ExecInput) error {
		err := st.Send(in)
		if errors.Is(err, io.EOF) {
			_, err = st.Recv()
		}
		return err
	}
	if err := send(&legionpb.ExecInput{Start: start}); err != nil {
		return execResult{}, err
	}
	for _, in := range input {
		if err := send(&legionpb.ExecInput{Stdin: []byte(in)}); err != nil {
			return execResult{}, err
		}
	}
	if start.Stdin {
		if err := send(&legionpb.ExecInput{StdinClosed: true}); err != nil {
			return execResult{}, err
		}
	}
	var r execResult
	var out, errOut strings.Builder
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return r, errors.New("ended without an exit code")
		}
		if err != nil {
			return r, err
		}
		if m.Node != "" {
			r.node = m.Node
		}
		out.Write(m.Stdout)
		errOut.Write(m.Stderr)
		if m.ExitCode != nil {
			r.stdout, r.stderr, r.code = out.String(), errOut.String(), int(*m.ExitCode)
			st.CloseSend()
			return r, nil
		}
	}
}

// An exec reaches the container through the task's node: input goes in,
// output and the exit code come back.
func TestExecRunsInTheTasksContainer(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{Kind: legion.KindService, Name: "web"}, "app")
	c := dial(t, m, m.Admin)
	r, err := execute(t, c, &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Kind: "Task", Name: "web.1"}, Command: []string{"cat"}, Stdin: true},
		"hello ", "world")
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != "hello world" || r.code != 0 || r.node != "n1" {
		t.Fatalf("cat: %+v", r)
	}
	r, err = execute(t, c, &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"fail", "went", "wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.stderr != "went wrong" || r.code != 3 || r.stdout != "" {
		t.Fatalf("fail: %+v", r)
	}
	if _, err := execute(t, c, &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"fail", "x"}, Tty: true}); err != nil {
		t.Fatal(err)
	}
	if calls := a.Execs.Calls(); len(calls) != 3 || calls[0] != task.Metadata.UID+"-app: cat" || calls[2] != task.Metadata.UID+"-app: fail x (tty)" {
		t.Fatalf("execs on the node %q", calls)
	}
}

// What exec refuses, each with its reason and code.
func TestExecRefusals(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	m.Put(t, "shop", "done.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	m.Put(t, "shop", "two.1", "n1", legion.TaskRunning, legion.Owner{}, "a", "b")
	a.Execs.Stop(task.Metadata.UID + "-app")
	worker, _ := dispatchertest.Issue(t, m.CA, "n9", pki.RoleWorker)
	for _, tc := range []struct {
		name   string
		client legionpb.PodsClient
		start  *legionpb.ExecStart
		code   codes.Code
		says   string
	}{
		{"a node certificate", dial(t, m, worker), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"cat"}}, codes.PermissionDenied, "exec: not allowed for a worker"},
		{"no command", dial(t, m, m.Admin), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}}, codes.InvalidArgument, "command: missing"},
		{"a finished task", dial(t, m, m.Admin), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "done.1"}, Command: []string{"cat"}}, codes.FailedPrecondition, "is complete, not running"},
		{"several containers", dial(t, m, m.Admin), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "two.1"}, Command: []string{"cat"}}, codes.InvalidArgument, "-c"},
		{"a stopped container", dial(t, m, m.Admin), &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"cat"}}, codes.FailedPrecondition, "is not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := execute(t, tc.client, tc.start)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
}

// The caller going away ends the command on the node.
func TestExecEndsWithItsCaller(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	ctx, cancel := context.WithCancel(context.Background())
	st, err := dial(t, m, m.Admin).Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&legionpb.ExecInput{Start: &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"wait"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the session reached the node
		t.Fatal(err)
	}
	dispatchertest.Poll(t, "the command running", 10*time.Second, func() bool { return a.Execs.Running() == 1 })
	cancel()
	dispatchertest.Poll(t, "the command ended", 10*time.Second, func() bool { return a.Execs.Running() == 0 })
}

// A user's sessions follow its RoleBindings in the task's namespace: logs
// take view, exec edit.
func TestUserSessionsFollowRoles(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	m.Put(t, "lab", "db.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	a.Logs.Append(task.Metadata.UID+"-app", rec(1, "stdout", "hello"))
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = "carol", "shop"
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "carol", Role: legion.RoleView}
	if _, _, err := m.Store.Put(context.Background(), b, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	carol, _ := dispatchertest.Issue(t, m.CA, "carol", pki.RoleUser)
	c := dial(t, m, carol)
	if frames, err := readAll(t, c, target("Task", "web.1", "")); err != nil || len(lines(frames)) != 1 {
		t.Fatalf("view reading logs: %v (%d lines)", err, len(lines(frames)))
	}
	req := target("Task", "db.1", "")
	req.Target.Namespace = "lab"
	if _, err := readAll(t, c, req); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no role in namespace lab") {
		t.Errorf("logs in another namespace: %v", err)
	}
	_, err := execute(t, c, &legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"cat"}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "exec: user carol is view in namespace shop; to use exec it needs edit") {
		t.Errorf("view running exec: %v", err)
	}
}
