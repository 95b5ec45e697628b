package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/jail"
)

// The session calls reach a node's agent through a manager and hand back
// only the client's own types.
func TestSessions(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	running := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	done := m.Put(t, "shop", "batch.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a.SaveOutput(t, done, "app", jail.FormatRecord(jail.LogRecord{Time: t0, Stream: "stdout", Text: "hello"})+
		jail.FormatRecord(jail.LogRecord{Time: t0.Add(time.Second), Stream: "stderr", Text: "careful", Partial: true}))
	c := adminOf(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("logs", func(t *testing.T) {
		var got []client.LogRecord
		var tasks []string
		err := c.Logs(ctx, client.Target{Namespace: "shop", Kind: legion.KindTask, Name: "batch.1"}, client.LogsOptions{},
			func(f client.LogFrame) error {
				if f.Task != "" {
					tasks = append(tasks, f.Task+" on "+f.Node)
				}
				got = append(got, f.Records...)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		want := []client.LogRecord{{Time: t0, Stream: "stdout", Text: "hello"},
			{Time: t0.Add(time.Second), Stream: "stderr", Text: "careful", Partial: true}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"batch.1 on n1"}, tasks); diff != "" {
			t.Errorf("frames naming the task (-want +got):\n%s", diff)
		}
	})

	t.Run("exec", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code, err := c.Exec(ctx, client.Target{Namespace: "shop", Name: "web.1"},
			client.ExecOptions{Command: []string{"cat"}, Stdin: strings.NewReader("ping"), Stdout: &out, Stderr: &errOut})
		if err != nil || code != 0 || out.String() != "ping" || errOut.Len() != 0 {
			t.Fatalf("cat: code %d, err %v, stdout %q, stderr %q", code, err, out.String(), errOut.String())
		}
		code, err = c.Exec(ctx, client.Target{Namespace: "shop", Name: "web.1"},
			client.ExecOptions{Command: []string{"fail", "no", "disk"}, Stderr: &errOut})
		if err != nil || code != 3 || errOut.String() != "no disk" {
			t.Fatalf("fail: code %d, err %v, stderr %q", code, err, errOut.String())
		}
		_, err = c.Exec(ctx, client.Target{Namespace: "shop", Name: "nope"}, client.ExecOptions{Command: []string{"cat"}})
		if client.Code(err).String() != "NotFound" {
			t.Fatalf("exec in a missing task: %v (%s), want NotFound", err, client.Code(err))
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		backend, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { backend.Close() })
		go func() {
			conn, err := backend.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			io.Copy(conn, conn) // echo until the client half-closes
		}()
		host, port, _ := net.SplitHostPort(backend.Addr().String())
		running.Status.IP = host
		if _, err := m.Store.PutStatus(ctx, running, store.Precondition{}); err != nil {
			t.Fatal(err)
		}
		a.Pods.Set(running.Metadata.UID, host)
		near, far := net.Pipe()
		fwd := make(chan error, 1)
		go func() {
			fwd <- c.PortForward(ctx, client.Target{Namespace: "shop", Name: "web.1"}, atoi(t, port), far)
		}()
		if _, err := near.Write([]byte("echo me")); err != nil {
			t.Fatalf("%v (the forward ended with %v)", err, <-fwd)
		}
		buf := make([]byte, len("echo me"))
		if _, err := io.ReadFull(near, buf); err != nil || string(buf) != "echo me" {
			t.Fatalf("through the forward: %q, %v (the forward ended with %v)", buf, err, <-fwd)
		}
		near.Close()
		if err := <-fwd; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("port-forward ended with %v", err)
		}
	})

	t.Run("bad targets", func(t *testing.T) {
		if err := c.Logs(ctx, client.Target{Kind: legion.KindVolume, Name: "x"}, client.LogsOptions{}, nil); err == nil ||
			!strings.Contains(err.Error(), "not a Volume") {
			t.Errorf("logs of a volume: %v", err)
		}
		if _, err := c.Exec(ctx, client.Target{Name: "web.1"}, client.ExecOptions{}); err == nil || !strings.Contains(err.Error(), "a command is required") {
			t.Errorf("exec without a command: %v", err)
		}
		near, far := net.Pipe()
		defer near.Close()
		if err := c.PortForward(ctx, client.Target{Name: "web.1"}, 70000, far); err == nil || !strings.Contains(err.Error(), "expected 1 to 65535") {
			t.Errorf("port-forward to port 70000: %v", err)
		}
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// adminOf is a client of m's cluster admin that does not retry.
func adminOf(t *testing.T, m *sessionstest.Manager) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Server: m.Addr, CredentialsFile: m.AdminFile, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
