package sessions_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
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
