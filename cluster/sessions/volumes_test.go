package sessions_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const mib = 1 << 20

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func sendDB() *legionpb.VolumeSendOffer {
	return &legionpb.VolumeSendOffer{Namespace: "shop", Volume: "db", VolumeUid: "u1", Snapshot: "legion-migrate-1"}
}

func recvDB() *legionpb.VolumeReceiveOffer {
	return &legionpb.VolumeReceiveOffer{Namespace: "shop", Volume: "db", VolumeUid: "u1"}
}

// twoNodes is a manager with the agents of n1 and n2.
func twoNodes(t *testing.T) (*sessionstest.Manager, *sessionstest.Agent, *sessionstest.Agent) {
	t.Helper()
	m := sessionstest.Start(t)
	return m, m.StartAgent(t, "n1"), m.StartAgent(t, "n2")
}

// A copy between two nodes moves every byte, in order, through the
// manager, and says so only once the receiver kept it.
func TestCopyVolumeMovesTheDataWhole(t *testing.T) {
	t.Parallel()
	m, n1, n2 := twoNodes(t)
	data := randomBytes(t, 9*mib+123) // not a whole number of chunks
	n1.Volumes.Put("shop", "db", data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Pods.CopyVolume(ctx, "n1", "n2", sendDB(), recvDB()); err != nil {
		t.Fatal(err)
	}
	size, sum, ok := n2.Volumes.Get("shop", "db")
	if !ok || size != int64(len(data)) || sum != sessionstest.Sum(data) {
		t.Fatalf("n2 holds %d bytes (sum %08x, held %v), want %d bytes (sum %08x)", size, sum, ok, len(data), sessionstest.Sum(data))
	}
	if got := strings.Join(n1.Volumes.Calls(), ","); got != "send shop/db" {
		t.Errorf("n1's calls: %s", got)
	}
	if got := strings.Join(n2.Volumes.Calls(), ","); got != "receive shop/db" {
		t.Errorf("n2's calls: %s", got)
	}
}

// Whichever side fails, or the sender's stream breaking midway, or the
// caller giving up: the copy fails with the reason, both sessions end,
// and the receiver is handed an error, never a clean end, so it keeps
// nothing.
func TestCopyVolumeFailsWholly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(n1, n2 *sessionstest.Agent)
		// act, once both sides are running, breaks something.
		act  func(cancel context.CancelFunc, n1 *sessionstest.Agent)
		code codes.Code
		says string
	}{
		{name: "sender's error",
			setup: func(n1, n2 *sessionstest.Agent) {
				n1.Volumes.Fail("shop", "db", 3*mib, status.Error(codes.ResourceExhausted, "snapshot: out of space"))
			},
			code: codes.ResourceExhausted, says: "sending volume shop/db: snapshot: out of space"},
		{name: "receiver's error",
			setup: func(n1, n2 *sessionstest.Agent) {
				n2.Volumes.Fail("shop", "db", 2*mib, errors.New("zfs receive: disk full"))
			},
			code: codes.Internal, says: "receiving volume shop/db: after 2097152 bytes: zfs receive: disk full"},
		{name: "sender's stream cut",
			setup: func(n1, n2 *sessionstest.Agent) { n1.Volumes.Fail("shop", "db", 3*mib, nil) },
			act:   func(_ context.CancelFunc, n1 *sessionstest.Agent) { n1.Stop() },
			code:  codes.Unavailable, says: "the agent of node n1 dropped the session"},
		{name: "caller gone",
			setup: func(n1, n2 *sessionstest.Agent) { n1.Volumes.Fail("shop", "db", 3*mib, nil) },
			act:   func(cancel context.CancelFunc, _ *sessionstest.Agent) { cancel() },
			code:  codes.Canceled, says: "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, n1, n2 := twoNodes(t)
			n1.Volumes.Put("shop", "db", randomBytes(t, 8*mib))
			tc.setup(n1, n2)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- m.Pods.CopyVolume(ctx, "n1", "n2", sendDB(), recvDB()) }()
			if tc.act != nil {
				dispatchertest.Poll(t, "both sides running", 10*time.Second, func() bool {
					return n1.Volumes.Running() == 1 && n2.Volumes.Running() == 1
				})
				tc.act(cancel, n1)
			}
			err := <-errc
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CopyVolume: %v, want %s saying %q", err, tc.code, tc.says)
			}
			dispatchertest.Poll(t, "both sides ended", 10*time.Second, func() bool {
				return n1.Volumes.Running() == 0 && n2.Volumes.Running() == 0
			})
			if rerr, ok := n2.Volumes.Received("shop", "db"); !ok || rerr == nil {
				t.Errorf("the receiver's stream ended with %v (ended: %v), want an error", rerr, ok)
			}
			if _, _, ok := n2.Volumes.Get("shop", "db"); ok {
				t.Error("the receiver kept a copy of a stream that was not whole")
			}
		})
	}
}

// Offers to a node with no sessions stream here fail at once, naming it.
func TestVolumeSessionsNeedTheNode(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n1 := m.StartAgent(t, "n1")
	n1.Volumes.Put("shop", "db", []byte("data"))
	ctx := context.Background()
	for name, err := range map[string]error{
		"copy to":   m.Pods.CopyVolume(ctx, "n1", "n9", sendDB(), recvDB()),
		"copy from": m.Pods.CopyVolume(ctx, "n9", "n1", sendDB(), recvDB()),
		"drop":      m.Pods.DropVolume(ctx, "n9", &legionpb.VolumeDropOffer{Namespace: "shop", Volume: "db"}),
	} {
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "node n9") {
			t.Errorf("%s n9: %v, want UNAVAILABLE naming n9", name, err)
		}
	}
}

// A drop answers once the node destroyed its copy, and carries its
// refusal while a task of the node uses the Volume.
func TestDropVolume(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n1 := m.StartAgent(t, "n1")
	n1.Volumes.Put("shop", "db", []byte("data"))
	n1.Volumes.Put("shop", "busy", []byte("data"))
	n1.Volumes.InUse("shop", "busy")
	ctx := context.Background()
	if err := m.Pods.DropVolume(ctx, "n1", &legionpb.VolumeDropOffer{Namespace: "shop", Volume: "db"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := n1.Volumes.Get("shop", "db"); ok {
		t.Error("the dropped copy is still there")
	}
	err := m.Pods.DropVolume(ctx, "n1", &legionpb.VolumeDropOffer{Namespace: "shop", Volume: "busy"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "in use by a task") {
		t.Errorf("drop of a volume in use: %v", err)
	}
	if _, _, ok := n1.Volumes.Get("shop", "busy"); !ok {
		t.Error("a volume in use was dropped")
	}
}

// BenchmarkCopyVolume moves 1 GiB between two in-memory agents through
// one manager, all on loopback with mutual TLS.
func BenchmarkCopyVolume(b *testing.B) {
	const size = 1 << 30
	m := sessionstest.Start(b)
	n1, n2 := m.StartAgent(b, "n1"), m.StartAgent(b, "n2")
	n1.Volumes.PutRepeated("shop", "db", randomBytes(b, mib), size)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if err := m.Pods.CopyVolume(context.Background(), "n1", "n2", sendDB(), recvDB()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got, _, _ := n2.Volumes.Get("shop", "db"); got != size {
		b.Fatalf("n2 holds %d bytes, want %d", got, size)
	}
}
