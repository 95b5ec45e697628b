package dispatcherclient

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// countingManager is a real Dispatcher whose gRPC server counts what it
// is sent: calls and streams by method, and the messages that came on
// heartbeat streams.
type countingManager struct {
	*dispatchertest.Manager

	mu       sync.Mutex
	calls    map[string]int
	streamed int
	// endAfter, when above zero, ends each heartbeat stream with
	// Unavailable once it has taken that many beats.
	endAfter int
	// stall holds each beat taken on a stream unanswered until the node
	// gives up on the stream.
	stall bool
	// older: the heartbeat stream is answered Unimplemented.
	older bool
}

// serveCounting runs a countingManager; older has it answer the heartbeat
// stream as a manager from before it would (Unimplemented), until told
// otherwise (setOlder).
func serveCounting(t *testing.T, older bool) *countingManager {
	t.Helper()
	m := &countingManager{calls: map[string]int{}, older: older}
	count := func(method string) (older bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.calls[method]++
		return m.older
	}
	m.Manager = dispatchertest.ServeWith(t, dispatchertest.NewCA(t), dispatcher.Fixed(dispatchertest.OpenStore(t)), nil, dispatcher.Options{},
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			count(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			older := count(info.FullMethod)
			if info.FullMethod != legionpb.Dispatcher_HeartbeatStream_FullMethodName {
				return h(srv, ss)
			}
			if older {
				// gRPC's own answer for a method the server does not have.
				return status.Errorf(codes.Unimplemented, "unknown method HeartbeatStream for service legion.v1.Dispatcher")
			}
			return h(srv, &countedStream{ServerStream: ss, m: m})
		}))
	return m
}

// setOlder makes m answer the heartbeat stream as an older manager, or
// not (upgraded in place).
func (m *countingManager) setOlder(older bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.older = older
}

// countedStream counts the beats a heartbeat stream takes.
type countedStream struct {
	grpc.ServerStream
	m *countingManager
	n int // beats taken on this stream
}

func (c *countedStream) RecvMsg(msg any) error {
	c.m.mu.Lock()
	end := c.m.endAfter > 0 && c.n == c.m.endAfter
	c.m.mu.Unlock()
	if end {
		return status.Error(codes.Unavailable, "the test's manager ends the stream")
	}
	err := c.ServerStream.RecvMsg(msg)
	if err == nil {
		c.n++
		c.m.mu.Lock()
		c.m.streamed++
		stall := c.m.stall
		c.m.mu.Unlock()
		if stall {
			<-c.Context().Done()
			return c.Context().Err()
		}
	}
	return err
}

// count is what m was sent: calls or streams of method, and beats
// taken on streams.
func (m *countingManager) count(method string) (calls, streamed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method], m.streamed
}

// registered is a Session of node-a registered with m.
func registered(t *testing.T, m *countingManager) *Session {
	t.Helper()
	s, err := New(Config{Managers: []string{m.Addr},
		TLS:    dispatchertest.Credentials(t, m.CA, "node-a", pki.RoleWorker).ClientConfig(),
		Status: func() legion.NodeStatus { return legion.NodeStatus{Hostname: "node-a"} },
		Usage:  func() []legion.Usage { return []legion.Usage{{Namespace: "web", Task: "a-1", CPU: 100}} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.register(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// beats sends n heartbeats, each of which must be taken.
func beats(t *testing.T, s *Session, m *countingManager, n int) {
	t.Helper()
	for i := range n {
		before := time.Now()
		if err := s.heartbeat(testCtx(t)); err != nil {
			t.Fatalf("beat %d: %v", i, err)
		}
		if at := m.Service.Heartbeats()["node-a"]; at.Before(before) {
			t.Fatalf("beat %d: the manager last heard node-a at %s, before the beat at %s", i, at, before)
		}
	}
}

// A node's beats go on one stream: one message each way, no call each.
func TestHeartbeatsShareOneStream(t *testing.T) {
	m := serveCounting(t, false)
	s := registered(t, m)
	beats(t, s, m, 4)
	streams, streamed := m.count(legionpb.Dispatcher_HeartbeatStream_FullMethodName)
	calls, _ := m.count(legionpb.Dispatcher_Heartbeat_FullMethodName)
	if streams != 1 || streamed != 4 || calls != 0 {
		t.Fatalf("4 beats came as %d streams with %d beats and %d calls, want 1 stream of 4 and no call", streams, streamed, calls)
	}
	if us := m.Service.Usage(); len(us) != 1 || us[0].Task != "a-1" || us[0].CPU != 100 {
		t.Errorf("usage %+v, want the beats' a-1 at 100m", us)
	}
}

// A stream the manager ends fails the beat on it, as a failed call
// would; the next beat opens another.
func TestHeartbeatsOpenAnotherStreamAfterOneEnds(t *testing.T) {
	m := serveCounting(t, false)
	m.endAfter = 2
	s := registered(t, m)
	beats(t, s, m, 2)
	if err := s.heartbeat(testCtx(t)); status.Code(err) != codes.Unavailable {
		t.Fatalf("the beat on the stream the manager ended: %v, want Unavailable", err)
	}
	beats(t, s, m, 2)
	if streams, _ := m.count(legionpb.Dispatcher_HeartbeatStream_FullMethodName); streams != 2 {
		t.Fatalf("%d streams, want the first and one opened after it ended", streams)
	}
}

// A manager older than the stream takes beats as calls: the stream is
// asked for once, then again after askStreamAgain calls, which finds it
// once the manager has been upgraded in place.
func TestHeartbeatsToAnOlderManagerGoAsCalls(t *testing.T) {
	m := serveCounting(t, true)
	s := registered(t, m)
	n := askStreamAgain + 2
	beats(t, s, m, n)
	streams, streamed := m.count(legionpb.Dispatcher_HeartbeatStream_FullMethodName)
	calls, _ := m.count(legionpb.Dispatcher_Heartbeat_FullMethodName)
	if streams != 2 || streamed != 0 || calls != n {
		t.Fatalf("%d beats to an older manager: %d streams asked for, %d beats streamed, %d calls; want the stream asked for twice (at the first beat and after %d calls) and %d calls",
			n, streams, streamed, calls, askStreamAgain, n)
	}
	m.setOlder(false)
	beats(t, s, m, askStreamAgain+2)
	streams, streamed = m.count(legionpb.Dispatcher_HeartbeatStream_FullMethodName)
	// The count since the last ask goes on: askStreamAgain more calls,
	// then the stream, asked for a third time, takes the last two beats.
	if calls, _ := m.count(legionpb.Dispatcher_Heartbeat_FullMethodName); calls != n+askStreamAgain || streams != 3 || streamed != 2 {
		t.Fatalf("after the upgrade: %d calls, %d streams asked for, %d beats streamed; want %d calls, then the stream asked for again and kept for 2 beats",
			calls, streams, streamed, n+askStreamAgain)
	}
	if _, older := s.noStream[m.Addr]; older {
		t.Errorf("the upgraded manager still marked as older")
	}
}

// A beat the manager does not answer in its time fails as a call that
// timed out would (the next manager is tried), and ends the stream: the
// next beat opens another.
func TestHeartbeatsLeaveAStreamThatDoesNotAnswer(t *testing.T) {
	m := serveCounting(t, false)
	s := registered(t, m)
	beats(t, s, m, 1)
	m.mu.Lock()
	m.stall = true
	m.mu.Unlock()
	if err := s.heartbeat(testCtx(t)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a beat left unanswered: %v, want DeadlineExceeded", err)
	}
	m.mu.Lock()
	m.stall = false
	m.mu.Unlock()
	beats(t, s, m, 1)
	if streams, _ := m.count(legionpb.Dispatcher_HeartbeatStream_FullMethodName); streams != 2 {
		t.Fatalf("%d streams, want the first and one opened after it went unanswered", streams)
	}
}
