package server

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/legionbsd/legion/internal/proto"
)

// An AppendEntries request as protobuf (pb.RaftAppend) rather than JSON:
// the pipeline sends it so once a follower has said it reads it. Each
// entry's data goes as it is; in JSON it went as base64, a third larger,
// and encoding and decoding it was most of what replication cost a
// follower. The messages share the request's byte slices, and a decoded
// request owns those protobuf decoded (protobuf copies bytes it decodes).

// appendToProto is a as pb.RaftAppend.
func appendToProto(a *raft.AppendEntriesRequest) *pb.RaftAppend {
	m := &pb.RaftAppend{
		ProtocolVersion:   int64(a.ProtocolVersion),
		Id:                a.ID,
		Addr:              a.Addr,
		Term:              a.Term,
		Leader:            a.Leader, //nolint:staticcheck // raft still fills it for older peers
		PrevLogEntry:      a.PrevLogEntry,
		PrevLogTerm:       a.PrevLogTerm,
		LeaderCommitIndex: a.LeaderCommitIndex,
		Entries:           make([]*pb.RaftLog, len(a.Entries)),
	}
	for i, e := range a.Entries {
		m.Entries[i] = &pb.RaftLog{Index: e.Index, Term: e.Term, Type: uint32(e.Type), Data: e.Data,
			Extensions: e.Extensions, AppendedAtUnixNano: unixNano(e.AppendedAt)}
	}
	return m
}

// appendFromProto is the request m carries; an entry whose type does not
// fit raft's (a byte) is refused, as JSON's decoder refuses it.
func appendFromProto(m *pb.RaftAppend) (*raft.AppendEntriesRequest, error) {
	a := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(m.ProtocolVersion), ID: m.Id, Addr: m.Addr},
		Term:              m.Term,
		Leader:            m.Leader, //nolint:staticcheck // as raft sent it
		PrevLogEntry:      m.PrevLogEntry,
		PrevLogTerm:       m.PrevLogTerm,
		LeaderCommitIndex: m.LeaderCommitIndex,
	}
	if len(m.Entries) > 0 {
		a.Entries = make([]*raft.Log, len(m.Entries))
		logs := make([]raft.Log, len(m.Entries)) // one allocation for all
		for i, e := range m.Entries {
			if e.Type > math.MaxUint8 {
				return nil, fmt.Errorf("entry %d (index %d): type %d is not a log type", i, e.Index, e.Type)
			}
			logs[i] = raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogType(e.Type), Data: e.Data,
				Extensions: e.Extensions, AppendedAt: fromUnixNano(e.AppendedAtUnixNano)}
			a.Entries[i] = &logs[i]
		}
	}
	return a, nil
}

// unixNano is t in nanoseconds since 1970, 0 for the zero time and for a
// time int64 nanoseconds cannot hold (before 1678 or after 2262): raft
// stamps entries with the leader's clock and reads the stamp only for
// its metrics.
func unixNano(t time.Time) int64 {
	if t.IsZero() || t.Year() < 1678 || t.Year() > 2261 {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
