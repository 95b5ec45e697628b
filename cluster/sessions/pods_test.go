package sessions_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func rec(sec int, stream, text string) jail.LogRecord {
	return jail.LogRecord{Time: t0.Add(time.Duration(sec) * time.Second), Stream: stream, Text: text}
}

// line is a record as the CLI would see it.
type line struct {
	Sec    int
	Stream string
	Text   string
}

func lines(frames []*legionpb.LogFrame) []line {
	var out []line
	for _, f := range frames {
		for _, r := range f.Records {
			out = append(out, line{int(time.Unix(0, r.TimeUnixNano).Sub(t0) / time.Second), r.Stream, r.Text})
		}
	}
	return out
}

func dial(t *testing.T, m *sessionstest.Manager, creds *pki.Credentials) legionpb.PodsClient {
	t.Helper()
	c, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return legionpb.NewPodsClient(c)
}

// readAll reads a logs session to its end.
func readAll(t *testing.T, c legionpb.PodsClient, req *legionpb.LogsRequest) ([]*legionpb.LogFrame, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Logs(ctx, req)
	if err != nil {
		return nil, err
	}
	var frames []*legionpb.LogFrame
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, f)
	}
}

func target(kind, name, container string) *legionpb.LogsRequest {
	return &legionpb.LogsRequest{Target: &legionpb.Target{Namespace: "shop", Kind: kind, Name: name, Container: container}}
}

func TestFinishedTaskServesSavedOutput(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "batch.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	a.SaveOutput(t, task, "app", jail.FormatRecord(rec(1, "stdout", "hello"))+
		jail.FormatRecord(rec(2, "stderr", "oops"))+jail.FormatRecord(rec(3, "stdout", "bye")))
	frames, err := readAll(t, dial(t, m, m.Admin), target("", "batch.1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{1, "stdout", "hello"}, {2, "stderr", "oops"}, {3, "stdout", "bye"}}, lines(frames)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if f := frames[0]; f.Task != "batch.1" || f.Container != "app" || f.Node != "n1" {
		t.Errorf("first frame names %s/%s on %s, want batch.1/app on n1", f.Task, f.Container, f.Node)
	}
	// --since keeps the later records only, and a follow of saved output
	// ends at its end.
	req := target("", "batch.1", "")
	req.Follow, req.SinceUnixNano = true, t0.Add(2*time.Second).UnixNano()
	frames, err = readAll(t, dial(t, m, m.Admin), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{2, "stderr", "oops"}, {3, "stdout", "bye"}}, lines(frames)); diff != "" {
		t.Errorf("records since 2s (-want +got):\n%s", diff)
	}
}

func TestRunningContainerFollowsUntilCancelled(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	id := task.Metadata.UID + "-app"
	a.Logs.Append(id, rec(1, "stdout", "first"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := target("Task", "web.1", "app")
	req.Follow = true
	st, err := dial(t, m, m.Admin).Logs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []line, 16)
	done := make(chan error, 1)
	go func() {
		for {
			f, err := st.Recv()
			if err != nil {
				done <- err
				return
			}
			if l := lines([]*legionpb.LogFrame{f}); len(l) > 0 {
				got <- l
			}
		}
	}()
	want := func(w ...line) {
		t.Helper()
		var all []line
		deadline := time.After(10 * time.Second)
		for len(all) < len(w) {
			select {
			case l := <-got:
				all = append(all, l...)
			case err := <-done:
				t.Fatalf("session ended early: %v", err)
			case <-deadline:
				t.Fatalf("got %v, want %v", all, w)
			}
		}
		if diff := cmp.Diff(w, all); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
	}
	want(line{1, "stdout", "first"})
	a.Logs.Append(id, rec(2, "stdout", "second"), rec(3, "stderr", "third"))
	want(line{2, "stdout", "second"}, line{3, "stderr", "third"})
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("after cancel: %v, want Canceled", err)
	}
	// The user going away ends the agent's side: its reader is closed.
	dispatchertest.Poll(t, "the agent's reader closed", 10*time.Second, func() bool { return a.Logs.Readers() == 0 })
	a.Logs.Wait()
}

func TestOwnerPicksTask(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	put := func(o legion.Object) {
		if _, _, err := m.Store.Put(context.Background(), o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(&legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService, Metadata: legion.Metadata{Name: "web", Namespace: "shop"}}})
	put(&legion.Job{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob, Metadata: legion.Metadata{Name: "migrate", Namespace: "shop"}}})
	svc := legion.Owner{Kind: legion.KindService, Name: "web"}
	job := legion.Owner{Kind: legion.KindJob, Name: "migrate"}
	failed := m.Put(t, "shop", "web.1-a", "n1", legion.TaskFailed, svc, "app")
	running := m.Put(t, "shop", "web.1-b", "n1", legion.TaskRunning, svc, "app")
	m.Put(t, "shop", "web.2-a", "", legion.TaskPending, svc, "app")
	older := m.Put(t, "shop", "migrate-a", "n1", legion.TaskFailed, job, "app")
	newer := m.Put(t, "shop", "migrate-b", "n1", legion.TaskComplete, job, "app")
	a.Logs.Append(failed.Metadata.UID+"-app", rec(1, "stdout", "failed run"))
	a.Logs.Append(running.Metadata.UID+"-app", rec(2, "stdout", "running"))
	a.SaveOutput(t, older, "app", jail.FormatRecord(rec(3, "stdout", "older")))
	a.SaveOutput(t, newer, "app", jail.FormatRecord(rec(4, "stdout", "newer")))
	// A stateful service's ordinals, by their stable names: the running
	// task of db-1, not db-0's nor db-1's replaced one.
	put(&legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService, Metadata: legion.Metadata{Name: "db", Namespace: "shop"}},
		Spec: legion.ServiceSpec{Mode: legion.ModeStateful}})
	db := legion.Owner{Kind: legion.KindService, Name: "db"}
	for _, o := range []struct {
		name, hostname string
		state          legion.TaskState
		out            string
	}{{"db-0-1", "db-0", legion.TaskRunning, "zero"}, {"db-1-1", "db-1", legion.TaskShutdown, "one, before"}, {"db-1-2", "db-1", legion.TaskRunning, "one"}} {
		tk := m.Put(t, "shop", o.name, "n1", o.state, db, "pg")
		tk.Spec.Hostname, tk.Spec.Slot = o.hostname, int(o.hostname[3]-'0')
		put(tk)
		a.Logs.Append(tk.Metadata.UID+"-pg", rec(5, "stdout", o.out))
	}
	c := dial(t, m, m.Admin)
	for _, tc := range []struct {
		kind, name string
		task       string
		want       []line
	}{
		{"", "web", "web.1-b", []line{{2, "stdout", "running"}}},
		{"service", "web", "web.1-b", []line{{2, "stdout", "running"}}},
		{"", "migrate", "migrate-b", []line{{4, "stdout", "newer"}}},
		{"Task", "migrate-a", "migrate-a", []line{{3, "stdout", "older"}}},
		{"", "db-1", "db-1-2", []line{{5, "stdout", "one"}}},
	} {
		frames, err := readAll(t, c, target(tc.kind, tc.name, ""))
		if err != nil {
			t.Errorf("%s %s: %v", tc.kind, tc.name, err)
			continue
		}
		if frames[0].Task != tc.task {
			t.Errorf("%s %s: read task %s, want %s", tc.kind, tc.name, frames[0].Task, tc.task)
		}
		if diff := cmp.Diff(tc.want, lines(frames)); diff != "" {
			t.Errorf("%s %s: records (-want +got):\n%s", tc.kind, tc.name, diff)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	m.StartAgent(t, "n1")
	m.Put(t, "shop", "pair.1", "n1", legion.TaskRunning, legion.Owner{}, "app", "sidecar")
	m.Put(t, "shop", "away.1", "n2", legion.TaskRunning, legion.Owner{}, "app")
	m.Put(t, "shop", "nolog.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	m.Put(t, "shop", "waiting.1", "", legion.TaskPending, legion.Owner{}, "app")
	nostart := m.Put(t, "shop", "nostart.1", "n1", legion.TaskFailed, legion.Owner{}, "app")
	nostart.Status.Message = "container app: fork/exec /app: no such file or directory"
	if _, _, err := m.Store.Put(context.Background(), nostart, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	pulling := m.Put(t, "shop", "pulling.1", "n1", legion.TaskPreparing, legion.Owner{}, "app")
	pulling.Status.Message = "pulling image example.org/app:1"
	if _, _, err := m.Store.Put(context.Background(), pulling, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Put(t, "shop", "assigned.1", "n1", legion.TaskAssigned, legion.Owner{}, "app")
	unplaced := m.Put(t, "shop", "db-0-1", "", legion.TaskPending, legion.Owner{Kind: legion.KindService, Name: "db"}, "pg")
	unplaced.Spec.Hostname = "db-0"
	if _, _, err := m.Store.Put(context.Background(), unplaced, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	worker, _ := dispatchertest.Issue(t, m.CA, "n1", pki.RoleWorker)
	admin := dial(t, m, m.Admin)
	for _, tc := range []struct {
		what string
		c    legionpb.PodsClient
		req  *legionpb.LogsRequest
		code codes.Code
		msg  string
	}{
		{"two containers without -c", admin, target("", "pair.1", ""), codes.InvalidArgument, "task pair.1 has 2 containers (app, sidecar): choose one with -c"},
		{"a container the pod lacks", admin, target("", "pair.1", "db"), codes.NotFound, "task pair.1 has no container db: its containers are app, sidecar"},
		{"unknown task", admin, target("", "nope", ""), codes.NotFound, "no task, service, job or stateful ordinal named nope in namespace shop"},
		{"unknown task by kind", admin, target("task", "nope", ""), codes.NotFound, "no task named nope in namespace shop"},
		{"node's agent not connected", admin, target("", "away.1", ""), codes.Unavailable, "the agent of node n2 is not connected to this manager"},
		{"no output on the node", admin, target("", "nolog.1", ""), codes.NotFound, "container app of task shop/nolog.1 has no output on this node"},
		{"ended before it ran", admin, target("", "nostart.1", ""), codes.NotFound,
			"container app of task shop/nostart.1 has no output: the task ended before it ran: container app: fork/exec /app: no such file or directory"},
		{"not started yet", admin, target("", "pulling.1", ""), codes.NotFound,
			"container app of task shop/pulling.1 has no output yet: the task has not started (preparing: pulling image example.org/app:1)"},
		{"assigned, not started yet", admin, target("", "assigned.1", ""), codes.NotFound,
			"container app of task shop/assigned.1 has no output yet: the task has not started (assigned)"},
		{"not on a node", admin, target("", "waiting.1", ""), codes.FailedPrecondition, "task shop/waiting.1 is not on a node yet"},
		{"an ordinal not on a node", admin, target("", "db-0", ""), codes.FailedPrecondition, "stateful ordinal shop/db-0 has no task that reached a node: no output yet"},
		{"bad kind", admin, target("volume", "x", ""), codes.InvalidArgument, `target.kind "volume": expected Task, Service or Job`},
		{"a worker's certificate", dial(t, m, worker), target("", "pair.1", "app"), codes.PermissionDenied, "logs: not allowed for a worker certificate (n1)"},
	} {
		_, err := readAll(t, tc.c, tc.req)
		s := status.Convert(err)
		if s.Code() != tc.code || !strings.Contains(s.Message(), tc.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", tc.what, s.Code(), s.Message(), tc.code, tc.msg)
		}
	}
}

// A node may attach only to its own sessions, and an admin may not hold a
// node's stream.
func TestSessionsCallersChecked(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	admin, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(m.Admin.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := legionpb.NewSessionsClient(admin).Sessions(ctx, &legionpb.SessionsRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("an admin's Sessions: %v, want PermissionDenied", err)
	}
	n1, _ := dispatchertest.Issue(t, m.CA, "n1", pki.RoleWorker)
	node, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(n1.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	st2, err := legionpb.NewSessionsClient(node).Sessions(ctx, &legionpb.SessionsRequest{Node: "n2"})
	if err == nil {
		_, err = st2.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("n1 asking for n2's stream: %v, want PermissionDenied", err)
	}
	at, err := legionpb.NewSessionsClient(node).Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := at.Send(&legionpb.AttachOutput{Session: "made-up"}); err != nil {
		t.Fatal(err)
	}
	if _, err := at.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("attaching to an unknown session: %v, want NotFound", err)
	}
}

// The node of `legion up` is named after its host; its agent holds the
// manager's certificate and asks for that node by name.
func TestManagerAgentServesANamedNode(t *testing.T) {
	m := sessionstest.Start(t)
	a := m.StartManagerAgent(t, "4f2a9c", "vm")
	task := m.Put(t, "shop", "web.1", "vm", legion.TaskRunning, legion.Owner{}, "app")
	a.Logs.Append(task.Metadata.UID+"-app", rec(1, "stdout", "up"))
	frames, err := readAll(t, dial(t, m, m.Admin), target("", "web.1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{1, "stdout", "up"}}, lines(frames)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if m.Pods.Connected("4f2a9c") {
		t.Error("the stream is held under the certificate's name, want the node asked for")
	}
}

// A manager shutting down ends an open follow with UNAVAILABLE, and the
// agent's side with it, so a graceful stop is not held up.
func TestShutdownEndsAFollow(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	a.Logs.Append(task.Metadata.UID+"-app", rec(1, "stdout", "first"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := target("", "web.1", "")
	req.Follow = true
	st, err := dial(t, m, m.Admin).Logs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 1; {
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		n += len(f.Records)
	}
	m.Stopping()
	for {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "shutting down") {
			t.Errorf("after shutdown began: %v, want Unavailable saying the manager is shutting down", err)
		}
		break
	}
	dispatchertest.Poll(t, "the agent's reader closed", 10*time.Second, func() bool { return a.Logs.Readers() == 0 })
	a.Logs.Wait()
}
