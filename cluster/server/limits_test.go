package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// sizedService is an admitted Service whose encoding is within a few
// hundred bytes above or below size.
func sizedService(t testing.TB, name string, size int) *legion.Service {
	t.Helper()
	o, _ := legion.New(legion.KindService)
	s := o.(*legion.Service)
	s.Metadata = legion.Metadata{Name: name, Namespace: "default"}
	s.Spec.Pod.Containers = []legion.Container{{Name: "web", Image: "registry.example/shop/web:1.4"}}
	if err := legion.Admit(s); err != nil {
		t.Fatal(err)
	}
	encoded := func() int { d, _ := legion.MarshalJSON(s); return len(d) }
	// Containers of 60 KB commands, then the last one's command sized to
	// land on the target.
	for i := 0; encoded() < size; i++ {
		c := s.Spec.Pod.Containers[0]
		c.Name, c.Command = fmt.Sprintf("c%d", i), []string{strings.Repeat("x", 60_000)}
		s.Spec.Pod.Containers = append(s.Spec.Pod.Containers, c)
	}
	last := &s.Spec.Pod.Containers[len(s.Spec.Pod.Containers)-1]
	last.Command[0] = last.Command[0][:len(last.Command[0])-(encoded()-size)]
	if d := encoded() - size; d != 0 {
		t.Fatalf("sized service is %d bytes off %d", d, size)
	}
	return s
}

// An object just under the object limit replicates to three managers; a
// 2 MB one and one just over the limit are refused with the limit named,
// before anything is written, and writes go on.
func TestObjectLimitOnThreeManagers(t *testing.T) {
	t.Parallel()
	ms := threeSlowManagers(t)
	t.Cleanup(func() { stopAll(ms) })
	admin := adminClient(t, ms[0].addr, ms[0].dir)
	ctx := context.Background()

	under := sizedService(t, "under", legion.MaxObjectSize-64)
	// Unchanged too: under load the client may retry a write that landed.
	r, err := admin.ApplyOne(ctx, under, client.ApplyOptions{})
	if err != nil || (r.Outcome != client.Created && r.Outcome != client.Unchanged) {
		t.Fatalf("an object just under the limit: %+v %v", r, err)
	}
	at := r.Object.GetMetadata().Version
	for _, m := range ms {
		waitFor(t, "the object on "+m.addr, 15*time.Second, func() bool { return m.s.Store().AppliedIndex() >= at })
		got, _, err := m.s.Store().Get(legion.KindService, "default", "under")
		if err != nil || len(got.(*legion.Service).Spec.Pod.Containers) != len(under.Spec.Pod.Containers) {
			t.Fatalf("manager %s: %v", m.addr, err)
		}
	}

	lead := leaderOf(t, ms)
	for _, c := range []struct {
		name string
		obj  legion.Object
	}{
		{"2 MB", sizedService(t, "two-mb", 2_000_000)},
		{"just over", sizedService(t, "over", legion.MaxObjectSize+64)},
	} {
		before := lead.s.Store().Raft().LastIndex()
		_, err := admin.ApplyOne(ctx, c.obj, client.ApplyOptions{})
		if client.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 1048576 (1 MiB) allowed") {
			t.Fatalf("%s: %v", c.name, err)
		}
		if after := lead.s.Store().Raft().LastIndex(); after != before {
			t.Fatalf("%s: the refusal wrote: last index %d -> %d", c.name, before, after)
		}
	}
	// Writes continue, through every manager.
	for i, m := range ms {
		c := adminClient(t, m.addr, ms[0].dir)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.ApplyOne(wctx, configObj("default", fmt.Sprintf("after-%d", i), "x"), client.ApplyOptions{})
		cancel()
		if err != nil {
			t.Fatalf("a write through %s after the refusals: %v", m.addr, err)
		}
	}
}

// serveRaft is a transport's receiving side on loopback with the
// managers' message limit: it answers every AppendEntries with success and
// hands each request's entries to got. member, when set, checks each
// caller first, as the managers' membership does. It returns a sending
// side and the receiver's address.
func serveRaft(t *testing.T, got chan<- []*raft.Log, member func(context.Context) error) (*transport, raft.ServerAddress) {
	t.Helper()
	recv := newTransport("follower", nil)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage))
	if member == nil {
		member = func(context.Context) error { return nil }
	}
	pb.RegisterRaftServer(srv, &raftService{current: func() *transport { return recv },
		member: member, stopping: recv.shutdown})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { srv.Stop(); recv.Close(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case rpc := <-recv.Consumer():
				got <- rpc.Command.(*raft.AppendEntriesRequest).Entries
				rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil)
			case <-recv.shutdown:
				return
			}
		}
	}()
	go srv.Serve(lis)
	send := newTransport("leader", func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)))
	})
	t.Cleanup(func() { send.Close() })
	return send, raft.ServerAddress(lis.Addr().String())
}

// More entries of the largest size than one gRPC message holds reach the
// follower, in pieces, both by a single call and through a pipeline.
func TestTransportCarriesMoreThanAMessageOfEntries(t *testing.T) {
	t.Parallel()
	got := make(chan []*raft.Log, 64)
	send, addr := serveRaft(t, got, nil)
	n := MaxMessage/(store.MaxEntry/3*4) + 2
	data := []byte(strings.Repeat("d", store.MaxEntry))
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 3, PrevLogEntry: 9, PrevLogTerm: 3}
	for i := range n {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(10 + i), Term: 3, Type: raft.LogCommand, Data: data})
	}
	received := func(what string) {
		t.Helper()
		next := uint64(10)
		for next < uint64(10+n) {
			select {
			case es := <-got:
				for _, e := range es {
					if e.Index != next || len(e.Data) != len(data) {
						t.Fatalf("%s: entry %d of %d bytes, want %d", what, e.Index, len(e.Data), next)
					}
					next++
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: entries up to %d arrived, want up to %d", what, next-1, 10+n-1)
			}
		}
	}
	var resp raft.AppendEntriesResponse
	if err := send.AppendEntries("f", addr, req, &resp); err != nil || !resp.Success {
		t.Fatalf("AppendEntries of %d entries of %d bytes: %+v %v", n, len(data), resp, err)
	}
	received("a single call")

	p, err := send.AppendEntriesPipeline("f", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var presp raft.AppendEntriesResponse
	if _, err := p.AppendEntries(req, &presp); err != nil {
		t.Fatal(err)
	}
	received("a pipeline")
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil || !f.Response().Success {
			t.Fatalf("pipeline answer: %+v %v", f.Response(), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no pipeline answer")
	}
}

// A request over the payload limit is cut into pieces that chain, each
// under the limit, and carry no commit index past their own entries.
func TestAppendEntriesSplitsByBytes(t *testing.T) {
	t.Parallel()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 3,
		PrevLogEntry: 99, PrevLogTerm: 2, LeaderCommitIndex: 150}
	data := []byte(strings.Repeat("d", 1<<20))
	for i := range 40 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(100 + i), Term: 3, Type: raft.LogCommand, Data: data})
	}
	pieces, err := encodeAppend(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 2 {
		t.Fatalf("%d pieces for 40 MiB of entries", len(pieces))
	}
	prevIndex, prevTerm, next := uint64(99), uint64(2), uint64(100)
	for i, p := range pieces {
		if len(p) > maxRaftPayload {
			t.Fatalf("piece %d is %d bytes, over %d", i, len(p), maxRaftPayload)
		}
		var got raft.AppendEntriesRequest
		if err := json.Unmarshal(p, &got); err != nil {
			t.Fatal(err)
		}
		if got.PrevLogEntry != prevIndex || got.PrevLogTerm != prevTerm || got.Term != 3 || string(got.Addr) != "leader" {
			t.Fatalf("piece %d: prev %d/%d term %d, want prev %d/%d term 3", i, got.PrevLogEntry, got.PrevLogTerm, got.Term, prevIndex, prevTerm)
		}
		for _, e := range got.Entries {
			if e.Index != next || len(e.Data) != len(data) {
				t.Fatalf("piece %d: entry %d, want %d", i, e.Index, next)
			}
			next++
		}
		lastOf := got.Entries[len(got.Entries)-1].Index
		if want := min(uint64(150), lastOf); i < len(pieces)-1 && got.LeaderCommitIndex != want {
			t.Fatalf("piece %d: commit index %d, want %d", i, got.LeaderCommitIndex, want)
		}
		if i == len(pieces)-1 && got.LeaderCommitIndex != 150 {
			t.Fatalf("last piece: commit index %d, want 150", got.LeaderCommitIndex)
		}
		prevIndex, prevTerm = lastOf, 3
	}
	if next != 140 {
		t.Fatalf("pieces carried entries up to %d, want 139", next-1)
	}
}

// threeSlowManagers is threeManagers with a lease long enough for entries
// of a megabyte on a loaded test machine (the fast timing's 150 ms lease
// is lost to CPU starvation there, not to the entries).
func threeSlowManagers(t *testing.T) []*manager {
	t.Helper()
	slow := func(c *Config) {
		c.Timing.HeartbeatTimeout, c.Timing.ElectionTimeout = 2*time.Second, 2*time.Second
		c.Timing.LeaderLeaseTimeout = time.Second
		c.WriteTimeout = 20 * time.Second
	}
	ms, _ := threeManagers(t, slow)
	return ms
}
