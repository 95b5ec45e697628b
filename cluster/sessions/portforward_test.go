package sessions_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
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

// echoServer answers each line with it in upper case.
func echoServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					io.WriteString(c, strings.ToUpper(sc.Text())+"\n")
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// withIP records the task's pod address, as its agent reports it.
func withIP(t *testing.T, m *sessionstest.Manager, task *legion.Task, ip string) {
	t.Helper()
	task.Status.IP = ip
	if _, err := m.Store.PutStatus(context.Background(), task, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
}

// forwardOnce sends lines over one PortForward stream, half-closes, and
// returns everything the pod sent back.
func forwardOnce(t *testing.T, c legionpb.PodsClient, target *legionpb.Target, port int32, lines ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.PortForward(ctx)
	if err != nil {
		return "", err
	}
	if err := st.Send(&legionpb.PortForwardInput{Target: target, Port: port}); err != nil {
		return "", err
	}
	var got strings.Builder
	first, err := st.Recv()
	if err != nil {
		return "", err
	}
	if first.Task == "" {
		return "", errors.New("the first message names no task")
	}
	for _, l := range lines {
		if err := st.Send(&legionpb.PortForwardInput{Data: []byte(l + "\n")}); err != nil {
			return "", err
		}
	}
	st.Send(&legionpb.PortForwardInput{Closed: true})
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return got.String(), nil
		}
		if err != nil {
			return got.String(), err
		}
		got.Write(m.Data)
	}
}

// A connection reaches the pod's port through its node's agent, both
// ways, and the caller's end (a half-close) lets the pod finish.
func TestPortForwardReachesThePod(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	port := echoServer(t)
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app", "side")
	withIP(t, m, task, "127.0.0.1")
	a.Pods.Set(task.Metadata.UID, "127.0.0.1")
	got, err := forwardOnce(t, dial(t, m, m.Admin), &legionpb.Target{Namespace: "shop", Name: "web.1"}, int32(port), "hello", "again")
	if err != nil {
		t.Fatal(err)
	}
	if got != "HELLO\nAGAIN\n" {
		t.Fatalf("the pod answered %q", got)
	}
}

// What port-forward refuses, each with its reason and code.
func TestPortForwardRefusals(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	port := echoServer(t)
	moved := m.Put(t, "shop", "moved.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	withIP(t, m, moved, "127.0.0.1")
	a.Pods.Set(moved.Metadata.UID, "127.0.0.9") // the agent knows it elsewhere
	gone := m.Put(t, "shop", "gone.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	withIP(t, m, gone, "127.0.0.1") // no pod of it on the node
	m.Put(t, "shop", "done.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	c := dial(t, m, m.Admin)
	for _, tc := range []struct {
		name string
		task string
		port int32
		code codes.Code
		says string
	}{
		{"port out of range", "moved.1", 0, codes.InvalidArgument, "port 0"},
		{"a finished task", "done.1", int32(port), codes.FailedPrecondition, "not running"},
		{"an address the node does not hold", "moved.1", int32(port), codes.FailedPrecondition, "is at 127.0.0.9 on this node"},
		{"no pod on the node", "gone.1", int32(port), codes.NotFound, "has no pod on this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forwardOnce(t, c, &legionpb.Target{Namespace: "shop", Name: tc.task}, tc.port)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
}

// A check answers as a connection would start (the task reached, or the
// refusal) and connects nothing to the pod.
func TestPortForwardCheckConnectsNothing(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	withIP(t, m, task, "127.0.0.1")
	a.Pods.Set(task.Metadata.UID, "127.0.0.1")
	m.Put(t, "shop", "done.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = "vic", "shop"
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "vic", Role: legion.RoleView}
	if _, _, err := m.Store.Put(context.Background(), b, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	vic, _ := dispatchertest.Issue(t, m.CA, "vic", pki.RoleUser)
	check := func(c legionpb.PodsClient, name string) (*legionpb.PortForwardOutput, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		st, err := c.PortForward(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Send(&legionpb.PortForwardInput{Target: &legionpb.Target{Namespace: "shop", Name: name}, Port: port, Check: true}); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		out, err := st.Recv()
		if err != nil {
			return nil, err
		}
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("the stream of a check goes on after its answer: %v", err)
		}
		return out, nil
	}
	out, err := check(dial(t, m, m.Admin), "web.1")
	if err != nil || out.Task != "web.1" || out.Node != "n1" {
		t.Fatalf("a check of a running task: %v, %v", out, err)
	}
	if _, err := check(dial(t, m, m.Admin), "done.1"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not running") {
		t.Errorf("a check of a finished task: %v", err)
	}
	if _, err := check(dial(t, m, vic), "web.1"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "to use port-forward it needs edit") {
		t.Errorf("a check by a viewer: %v", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the pod's port took %d connections from checks", n)
	}
	// A connection proper reaches it, so the count above could move.
	if _, err := forwardOnce(t, dial(t, m, m.Admin), &legionpb.Target{Namespace: "shop", Name: "web.1"}, port); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); accepted.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pod's port took %d connections after one forwarded", accepted.Load())
		}
	}
}
