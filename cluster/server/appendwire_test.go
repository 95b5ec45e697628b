package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/jsonfast"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// randomAppend is a request with up to 20 entries of every kind raft
// writes, some without data, extensions or a time.
func randomAppend(r *rand.Rand) *raft.AppendEntriesRequest {
	bytesOf := func(max int) []byte {
		if r.IntN(4) == 0 {
			return nil
		}
		b := make([]byte, r.IntN(max))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	a := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: bytesOf(20), Addr: bytesOf(30)},
		Term:         r.Uint64(),
		Leader:       bytesOf(30),
		PrevLogEntry: r.Uint64(), PrevLogTerm: r.Uint64(), LeaderCommitIndex: r.Uint64(),
	}
	for range r.IntN(21) {
		e := &raft.Log{Index: r.Uint64(), Term: r.Uint64(), Type: raft.LogType(r.IntN(7)), Data: bytesOf(2000), Extensions: bytesOf(50)}
		if r.IntN(3) > 0 {
			e.AppendedAt = time.Unix(r.Int64N(1<<33), r.Int64N(1e9))
		}
		a.Entries = append(a.Entries, e)
	}
	return a
}

// A request sent as protobuf reaches the follower as the same request as
// its JSON did (the JSON the pipeline sent before, and still sends to a
// follower that has not said it reads protobuf).
func TestProtobufAppendReadsAsItsJSONDid(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		a := randomAppend(r)
		data, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON raft.AppendEntriesRequest
		if err := jsonfast.Unmarshal(data, &viaJSON); err != nil {
			t.Fatal(err)
		}
		wire, err := proto.Marshal(&pb.RaftMessage{Append: appendToProto(a)})
		if err != nil {
			t.Fatal(err)
		}
		var m pb.RaftMessage
		if err := proto.Unmarshal(wire, &m); err != nil {
			t.Fatal(err)
		}
		viaProto, err := decodeAppend(&m)
		if err != nil {
			t.Fatal(err)
		}
		// JSON gives empty slices where protobuf gives none; raft reads
		// both alike.
		if d := cmp.Diff(&viaJSON, viaProto, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("request %d: as protobuf (+) differs from as JSON (-):\n%s", i, d)
		}
		if len(wire) > len(data) {
			t.Fatalf("request %d: %d bytes as protobuf, %d as JSON", i, len(wire), len(data))
		}
	}
}

// An entry type that does not fit raft's byte is refused, as JSON's
// decoder refuses it, rather than cut to another type.
func TestProtobufAppendRefusesAnUnknownEntryType(t *testing.T) {
	t.Parallel()
	m := &pb.RaftMessage{Append: appendToProto(appendRequest(5, 6))}
	m.Append.Entries[1].Type = 258
	if _, err := decodeAppend(m); err == nil || !strings.Contains(err.Error(), "entry 1 (index 6): type 258 is not a log type") {
		t.Fatalf("an entry of type 258: %v", err)
	}
	data, _ := json.Marshal(appendRequest(5, 6))
	data = bytes.Replace(data, []byte(`"Type":0`), []byte(`"Type":258`), 1)
	if _, err := decodeAppend(&pb.RaftMessage{Payload: data}); err == nil {
		t.Fatal("JSON with an entry of type 258 was taken")
	}
}

// Entries as large as the store proposes are cut into the same pieces
// as for JSON, and each piece as protobuf stays under maxRaftPayload.
func TestProtobufAppendPiecesStayUnderTheLimit(t *testing.T) {
	t.Parallel()
	a := &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, PrevLogTerm: 2, LeaderCommitIndex: 14}
	for i := range 5 {
		a.Entries = append(a.Entries, &raft.Log{Index: uint64(10 + i), Term: 2, Type: raft.LogCommand,
			Data: make([]byte, store.MaxEntry), AppendedAt: time.Now()})
	}
	asJSON, err := appendMessages(a, false)
	if err != nil {
		t.Fatal(err)
	}
	asProto, err := appendMessages(a, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(asJSON) < 2 || len(asProto) != len(asJSON) {
		t.Fatalf("%d pieces as protobuf, %d as JSON; want the same, more than one", len(asProto), len(asJSON))
	}
	for i, m := range asProto {
		if m.Payload != nil || m.Append == nil {
			t.Fatalf("piece %d is not protobuf", i)
		}
		if n := proto.Size(m); n > maxRaftPayload {
			t.Fatalf("piece %d is %d bytes, over %d", i, n, maxRaftPayload)
		}
	}
}

// leaderStream is a pipeline stream's client side: what the pipeline
// sends goes to sent, and each request is answered with success, saying
// the follower reads protobuf when readsAppend.
type leaderStream struct {
	grpc.ClientStream
	ctx         context.Context
	readsAppend bool
	sent        chan *pb.RaftMessage
	answers     chan *pb.RaftMessage
}

func (s *leaderStream) Send(m *pb.RaftMessage) error {
	s.sent <- m
	ok, _ := json.Marshal(&raft.AppendEntriesResponse{Term: 3, Success: true})
	s.answers <- &pb.RaftMessage{Payload: ok, ReadsAppend: s.readsAppend}
	return nil
}

func (s *leaderStream) Recv() (*pb.RaftMessage, error) {
	select {
	case m := <-s.answers:
		return m, nil
	case <-s.ctx.Done():
		return nil, io.EOF
	}
}

// The pipeline sends JSON until the follower's answers say it reads
// protobuf, and protobuf from then on; to a follower that never says so
// (a manager built before), JSON throughout.
func TestPipelineSendsProtobufOnceTheFollowerReadsIt(t *testing.T) {
	t.Parallel()
	for _, reads := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		s := &leaderStream{ctx: ctx, readsAppend: reads, sent: make(chan *pb.RaftMessage, 8), answers: make(chan *pb.RaftMessage, 8)}
		p := newPipeline(s, cancel, func(*raft.AppendEntriesResponse) {})
		for i, from := range []uint64{10, 12, 14} {
			req := appendRequest(from, from+1)
			f, err := p.AppendEntries(req, &raft.AppendEntriesResponse{})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Error(); err != nil || !f.Response().Success {
				t.Fatalf("request %d: %v, %+v", i+1, err, f.Response())
			}
			m := <-s.sent
			if binary := m.Append != nil; binary != (reads && i > 0) {
				t.Fatalf("follower reads protobuf %v: request %d sent as protobuf %v", reads, i+1, binary)
			}
			got, err := decodeAppend(m)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(req, got, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("request %d as sent (+):\n%s", i+1, d)
			}
		}
		p.Close()
		p.wg.Wait()
	}
}
