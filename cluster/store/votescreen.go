package store

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// VoteScreener is a transport that shows the store each vote request
// (*raft.RequestVoteRequest, *raft.RequestPreVoteRequest) before raft
// takes it. When screen answers, the transport sends that answer and raft
// never sees the request; otherwise raft takes the request, which screen
// may have marked. Open sets the screen when the timing stands early
// (Timing.StandTimeout); a transport without it gets raft's own voting.
type VoteScreener interface {
	ScreenVotes(screen func(req any) (resp any, answered bool))
}

// screenVote lets a follower that has itself heard nothing from its
// leader for the heartbeat timeout vote as it would once raft noticed.
// Raft turns every candidate away while it knows a leader, and forgets
// the leader only when it stands itself. Under writes the replica that
// stands first often has the longer log, so the other cannot win, and
// turned away it waited its whole election timeout (2 to 4 s) to ask
// again: failovers under load took 7 to 9 s where idle ones took 5 to 6.
// Past the heartbeat timeout the leader is as silent here as the spec
// allows before an election, so the stickiness that guards a live leader
// from a returning replica has nothing left to guard: a pre-vote is
// answered here by raft's own rules, and a vote goes to raft marked as
// one that may pass a known leader (as in a handover), to be granted or
// refused by term, log and the vote already given in the term.
func (s *Store) screenVote(req any) (any, bool) {
	r := s.raft
	if r.State() != raft.Follower {
		return nil, false
	}
	leader, _ := r.LeaderWithID()
	if leader == "" || time.Since(r.LastContact()) < s.cfg.Timing.HeartbeatTimeout {
		return nil, false
	}
	switch req := req.(type) {
	case *raft.RequestVoteRequest:
		req.LeadershipTransfer = true
	case *raft.RequestPreVoteRequest:
		if s.cfg.Transport.DecodePeer(req.Addr) == leader {
			return nil, false // raft takes its leader's own request
		}
		v, err := s.voterState()
		if err != nil {
			return nil, false
		}
		granted, term, refused := preVote(v, req)
		if granted {
			s.preVoted.Store(time.Now().UnixNano())
		} else {
			// As raft says it of the pre-votes it answers itself (at
			// debug level: see raftSink).
			s.log.Debug("rejecting pre-vote request since "+refused, "component", "raft", "from", string(req.ID),
				"term", req.Term, "last-log-index", req.LastLogIndex, "last-log-term", req.LastLogTerm)
		}
		return &raft.RequestPreVoteResponse{RPCHeader: s.rpcHeader(), Term: term, Granted: granted}, true
	}
	return nil, false
}

// voterState is what a replica's answer to a pre-vote rests on.
type voterState struct {
	term                uint64 // the current term
	lastIndex, lastTerm uint64 // the last entry, in the log or the snapshot
	servers             []raft.Server
}

// voterState reads the replica's voterState from raft.
func (s *Store) voterState() (voterState, error) {
	st := s.raft.Stats()
	var n [5]uint64
	for i, k := range []string{"term", "last_log_index", "last_log_term", "last_snapshot_index", "last_snapshot_term"} {
		v, err := strconv.ParseUint(st[k], 10, 64)
		if err != nil {
			return voterState{}, err
		}
		n[i] = v
	}
	v := voterState{term: n[0], lastIndex: n[1], lastTerm: n[2]}
	if n[3] > v.lastIndex { // the log was compacted up to the snapshot
		v.lastIndex, v.lastTerm = n[3], n[4]
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return voterState{}, err
	}
	v.servers = f.Configuration().Servers
	return v, nil
}

// preVote is raft's answer to a pre-vote from a replica that knows no
// leader (raft's requestPreVote past its leader check): granted to a
// voter of the configuration asking for a term not behind this one,
// whose log is at least as up to date; the term answered is the later of
// the two. refused says why it is not granted, in raft's words.
func preVote(v voterState, req *raft.RequestPreVoteRequest) (granted bool, term uint64, refused string) {
	term = v.term
	candidate := raft.ServerID(req.ID)
	var known, voter bool
	for _, sv := range v.servers {
		if sv.ID == candidate {
			known, voter = true, sv.Suffrage == raft.Voter
		}
	}
	switch {
	case len(v.servers) > 0 && !known:
		return false, term, "node is not in configuration"
	case req.Term < v.term:
		return false, term, "our term is greater"
	}
	term = max(term, req.Term)
	switch {
	case len(v.servers) > 0 && !voter:
		return false, term, "node is not a voter"
	case v.lastTerm > req.LastLogTerm:
		return false, term, "our last term is greater"
	case v.lastTerm == req.LastLogTerm && v.lastIndex > req.LastLogIndex:
		return false, term, "our last index is greater"
	}
	return true, term, ""
}

// rpcHeader is the header raft puts on this replica's answers.
func (s *Store) rpcHeader() raft.RPCHeader {
	id := raft.ServerID(s.cfg.ID)
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(id),
		Addr:            s.cfg.Transport.EncodePeer(id, s.cfg.Transport.LocalAddr()),
	}
}

// votedLately reports whether screenVote granted a pre-vote within the
// stand timeout. A replica that stood then as well would ask the
// candidate for a pre-vote, which raft grants to any replica as up to
// date, and the two would each vote for themselves in the same term and
// wait out an election timeout; left alone, the candidate is elected
// with this replica's vote.
func (s *Store) votedLately() bool {
	return time.Since(time.Unix(0, s.preVoted.Load())) < s.cfg.Timing.StandTimeout
}
