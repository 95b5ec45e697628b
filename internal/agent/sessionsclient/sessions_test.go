package sessionsclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent/sessionsclient"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/jail"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// manager serves Pods and Sessions over st on lis until stop.
type manager struct {
	svc  *sessions.Service
	addr string
	stop func()
}

func serve(t *testing.T, ca *pki.CA, st *store.Store, lis net.Listener) *manager {
	t.Helper()
	svc := sessions.New(sessions.FromStore(func() *store.Store { return st }), sessions.Options{})
	creds, _ := dispatchertest.Issue(t, ca, "m", pki.RoleManager)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(creds.ServerConfig())))
	svc.RegisterOn(g)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	var once sync.Once
	stop := func() { once.Do(func() { g.Stop(); <-done }) }
	t.Cleanup(stop)
	return &manager{svc: svc, addr: lis.Addr().String(), stop: stop}
}

// The agent keeps a stream with every manager listed, reopens one that
// broke, and drops the managers no longer listed.
func TestStreamsFollowTheManagers(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	m1 := serve(t, ca, st, dispatchertest.Listen(t))
	m2 := serve(t, ca, st, dispatchertest.Listen(t))
	var mu sync.Mutex
	list := []string{m1.addr, m2.addr}
	managers := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), list...) }
	creds, _ := dispatchertest.Issue(t, ca, "n1", pki.RoleWorker)
	c, err := sessionsclient.New(sessionsclient.Config{Managers: managers, TLS: creds.ClientConfig(), Logs: sessionstest.NewLogs().Read,
		DataDir: t.TempDir(), Backoff: 20 * time.Millisecond, Refresh: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	connected := func(m *manager) func() bool { return func() bool { return m.svc.Connected("n1") } }
	dispatchertest.Poll(t, "streams with both managers", 10*time.Second, func() bool { return connected(m1)() && connected(m2)() })

	// m1 restarts on the same address: the agent opens its stream again.
	addr := m1.addr
	m1.stop()
	dispatchertest.Poll(t, "m1 seeing the stream gone", 10*time.Second, func() bool { return !connected(m1)() })
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	m1 = serve(t, ca, st, lis)
	dispatchertest.Poll(t, "the stream with the restarted m1", 10*time.Second, connected(m1))

	// m2 leaves the list: its stream is closed.
	mu.Lock()
	list = []string{m1.addr}
	mu.Unlock()
	dispatchertest.Poll(t, "m2's stream closed", 10*time.Second, func() bool { return !connected(m2)() })
	if !connected(m1)() {
		t.Error("m1's stream closed with m2's")
	}
}

func TestNewChecksConfig(t *testing.T) {
	read := sessionstest.NewLogs().Read
	tlsCfg := &tls.Config{}
	list := func() []string { return nil }
	for _, tc := range []struct {
		cfg  sessionsclient.Config
		want string
	}{
		{sessionsclient.Config{}, "sessions: Managers"},
		{sessionsclient.Config{Managers: list}, "sessions: TLS"},
		{sessionsclient.Config{Managers: list, TLS: tlsCfg}, "sessions: Logs"},
		{sessionsclient.Config{Managers: list, TLS: tlsCfg, Logs: read}, "sessions: DataDir"},
	} {
		if _, err := sessionsclient.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := sessionsclient.New(sessionsclient.Config{Managers: list, TLS: tlsCfg, Logs: read, DataDir: t.TempDir()}); err != nil {
		t.Errorf("New with everything: %v", err)
	}
}

// A finished task's saved output of 1 MiB (as much as the agent keeps)
// arrives whole, in frames of bounded size.
func TestLargeSavedOutputArrivesWhole(t *testing.T) {
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "big.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	var b strings.Builder
	var want []string
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := 0; b.Len() < 1<<20; i++ {
		text := fmt.Sprintf("line %06d %s", i, strings.Repeat("x", 60))
		b.WriteString(jail.FormatRecord(jail.LogRecord{Time: t0.Add(time.Duration(i) * time.Millisecond), Stream: jail.StreamStdout, Text: text}))
		want = append(want, text)
	}
	a.SaveOutput(t, task, "app", b.String())
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(m.Admin.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := legionpb.NewPodsClient(conn).Logs(ctx, &legionpb.LogsRequest{Target: &legionpb.Target{Namespace: "shop", Name: "big.1"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	frames := 0
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range f.Records {
			got = append(got, r.Text)
			size += len(r.Text)
		}
		if size > 128<<10 {
			t.Errorf("a frame of %d bytes of text, want at most about 64 KiB", size)
		}
		frames++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if frames < 10 {
		t.Errorf("%d frames for 1 MiB, want it batched in several", frames)
	}
}

// A follow of a container removed before any of its log was read (a
// job's task that said its line and ended at once) goes on with the
// output its pod's removal saved, and ends with it; one that said nothing
// and left nothing saved ends with nothing, as its follow would have.
func TestFollowOfAContainerRemovedUnreadReadsItsSavedOutput(t *testing.T) {
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(m.Admin.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	through := jail.LogRecord{Time: t0, Stream: jail.StreamStdout, Text: "through"}
	for _, saved := range []bool{true, false} {
		t.Run(fmt.Sprintf("saved=%v", saved), func(t *testing.T) {
			name := fmt.Sprintf("steps.%v", saved)
			task := m.Put(t, "batch", name, "n1", legion.TaskRunning, legion.Owner{}, "app")
			id := task.Metadata.UID + "-app"
			a.Logs.Append(id) // made, nothing written yet
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stream, err := legionpb.NewPodsClient(conn).Logs(ctx, &legionpb.LogsRequest{Target: &legionpb.Target{Namespace: "batch", Name: name}, Follow: true})
			if err != nil {
				t.Fatal(err)
			}
			testpoll.Until(t, "the agent following the container", 20*time.Second, 10*time.Millisecond, func() bool { return a.Logs.Readers() == 1 })
			if saved {
				a.SaveOutput(t, task, "app", jail.FormatRecord(through))
			}
			a.Logs.WriteAndRemove(id, through)
			var got []string
			for {
				f, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("follow after %v: %v", got, err)
				}
				for _, r := range f.Records {
					got = append(got, r.Text)
				}
			}
			want := []string{"through"}
			if !saved {
				want = nil
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}
