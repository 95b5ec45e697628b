package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// How a joining manager becomes a voter.
const (
	// joinVoterWait bounds how long legion join of a manager waits for it
	// to vote before failing (it goes on trying in the background).
	joinVoterWait = 2 * time.Minute
	// joinPoll is how often a joining manager asks again or looks at its
	// own progress.
	joinPoll = 50 * time.Millisecond
	// promoteCallTimeout bounds one Promote call.
	promoteCallTimeout = 5 * time.Second
)

// votedFile, in the data directory, marks a manager that has been a
// voter: after a restart it asks to vote again only if it never did, so
// a manager the admin demoted stays demoted.
const votedFile = "voted"

// raftConfig reads the store's Raft configuration and the index it was
// written at.
func raftConfig(st *store.Store) (raft.Configuration, uint64, error) {
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, fmt.Errorf("reading the managers: %w", err)
	}
	return f.Configuration(), f.Index(), nil
}

// findServer returns the Raft member with id.
func findServer(c raft.Configuration, id string) (raft.Server, bool) {
	for _, m := range c.Servers {
		if string(m.ID) == id {
			return m, true
		}
	}
	return raft.Server{}, false
}

func voters(c raft.Configuration) int {
	n := 0
	for _, m := range c.Servers {
		if m.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// isVoter reports whether this manager's own Raft configuration lists it
// as a voter.
func (s *Server) isVoter(st *store.Store) bool {
	c, _, err := raftConfig(st)
	if err != nil {
		return false
	}
	m, ok := findServer(c, s.nodeID)
	return ok && m.Suffrage == raft.Voter
}

// waitVoter is the end of a manager's join: it asks the leader, through
// the manager it joined by, to add it to Raft now that it serves its new
// certificate, catches up, and asks to vote; it fails after
// joinVoterWait, naming what it was waiting for.
func (s *Server) waitVoter(ctx context.Context, through string) error {
	ctx, cancel := context.WithTimeout(ctx, joinVoterWait)
	defer cancel()
	if err := s.becomeVoter(ctx, through); err != nil {
		code := codes.DeadlineExceeded
		if c := status.Code(errors.Unwrap(err)); c == codes.PermissionDenied {
			code = c
		}
		return status.Errorf(code, "manager %s joined but is not a voter after %s (it keeps trying in the background): %v", s.nodeID, joinVoterWait, err)
	}
	return nil
}

// unfinishedJoin reports whether this manager joined but never voted:
// Raft knows it as a non-voter, or not yet at all. One the admin demoted
// voted before (votedFile) and stays as it is, as does the manager that
// initialised the cluster.
func (s *Server) unfinishedJoin(st *store.Store) bool {
	if len(s.JoinedThrough()) == 0 {
		return false
	}
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, votedFile)); err == nil {
		return false
	}
	c, _, err := raftConfig(st)
	if err != nil {
		return false
	}
	m, ok := findServer(c, s.nodeID)
	return len(c.Servers) == 0 || ok && m.Suffrage != raft.Voter
}

// askJoin sends the join, asking again while the manager reached
// answers UNAVAILABLE (an election in progress), for up to
// joinVoterWait. A manager not reached, or a handshake refused (another
// cluster's CA), fails at once.
func (s *Server) askJoin(ctx context.Context, conn grpc.ClientConnInterface, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, joinVoterWait)
	defer cancel()
	for {
		var reached peer.Peer
		resp, err := pb.NewClusterClient(conn).Join(ctx, req, grpc.Peer(&reached))
		if status.Code(err) != codes.Unavailable || reached.Addr == nil {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(joinPoll):
		}
	}
}

// keepJoining goes on with becomeVoter in the background until the
// manager votes or stops.
func (s *Server) keepJoining() {
	through := ""
	if t := s.JoinedThrough(); len(t) > 0 {
		through = t[0]
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.becomeVoter(s.watchCtx, through); err != nil {
			s.log.Warn("not a voter", "node", s.nodeID, "err", err)
		}
	}()
}

// becomeVoter asks until this manager votes, from its own configuration's
// point of view too; the error says what it was waiting for.
func (s *Server) becomeVoter(ctx context.Context, through string) error {
	waiting := "the leader to add it to Raft"
	var last error
	asked := false // the leader answered that it votes
	tick := time.NewTicker(joinPoll)
	defer tick.Stop()
	for {
		st := s.store()
		if st == nil {
			return errors.New("this manager's store is not open")
		}
		if asked && s.isVoter(st) {
			if err := os.WriteFile(filepath.Join(s.cfg.DataDir, votedFile), nil, 0o600); err != nil {
				s.log.Warn("marking this manager a voter", "err", err)
			}
			s.log.Info("a voter now", "node", s.nodeID)
			return nil
		}
		applied := st.Raft().AppliedIndex()
		if !asked {
			resp, err := s.askPromote(ctx, st, through, applied)
			switch {
			case status.Code(err) == codes.PermissionDenied:
				return fmt.Errorf("waiting for %s: %w", waiting, err)
			case err != nil:
				last = err
			case resp.Voter:
				asked, last = true, nil
				waiting = "its own Raft configuration to list it as a voter"
			case resp.Index > applied:
				last = nil
				waiting = fmt.Sprintf("catching up with the leader to index %d (applied %d)", resp.Index, applied)
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: last answer: %w", waiting, last)
			}
			return fmt.Errorf("waiting for %s", waiting)
		case <-tick.C:
		}
	}
}

// askPromote sends Promote to the leader, or to the manager joined
// through while this one knows no leader.
func (s *Server) askPromote(ctx context.Context, st *store.Store, through string, applied uint64) (*pb.PromoteResponse, error) {
	addr, _ := st.Leader()
	if addr == "" {
		addr = through
	}
	if addr == "" {
		return nil, notApplied("no leader known yet")
	}
	conn, err := s.peer(addr)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, promoteCallTimeout)
	defer cancel()
	return pb.NewClusterClient(conn).Promote(cctx, &pb.PromoteRequest{NodeId: s.nodeID, Address: s.cfg.Advertise, AppliedIndex: applied})
}

// leafOf is the certificate the caller presented, nil without one.
func leafOf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// Promote adds a manager that joined to Raft as a non-voter, on its own
// request once it serves its certificate, and makes it a voter once it
// has applied the configuration that added it. The manager asks for
// itself; a manager it asked through vouches for it, having checked its
// certificate against its own replica.
func (c *clusterService) Promote(ctx context.Context, req *pb.PromoteRequest) (*pb.PromoteResponse, error) {
	s := c.s
	if forwarded(ctx) {
		if err := s.checkMember(ctx); err != nil {
			return nil, err
		}
	} else {
		id := callerOf(ctx).id
		if id == nil || id.Name != req.NodeId {
			return nil, status.Error(codes.PermissionDenied, "a manager promotes only itself")
		}
		st := s.store()
		if st == nil {
			return nil, s.notServing(s.role())
		}
		if err := joinedWith(st, leafOf(ctx)); err != nil {
			return nil, err
		}
	}
	st, conn, fctx, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).Promote(fctx, req)
	}
	cfg, at, err := raftConfig(st)
	if err != nil {
		return nil, toStatus(err)
	}
	m, ok := findServer(cfg, req.NodeId)
	switch {
	case !ok:
		if req.Address == "" {
			return nil, status.Error(codes.InvalidArgument, "promote: address: required (where the other managers reach this one)")
		}
		f := st.Raft().AddNonvoter(raft.ServerID(req.NodeId), raft.ServerAddress(req.Address), 0, s.writeTimeout())
		if err := f.Error(); err != nil {
			return nil, raftChangeError("adding manager "+req.NodeId+" to Raft as a non-voter", err)
		}
		s.log.Info("manager added to raft as a non-voter", "node", req.NodeId, "address", req.Address)
		return &pb.PromoteResponse{Index: f.Index()}, nil
	case m.Suffrage == raft.Voter:
		// Asked again (the last answer lost, or its wait cut short).
		s.waitVotersHold(ctx, st, at, "manager "+req.NodeId+" a voter")
		return &pb.PromoteResponse{Voter: true}, nil
	case req.AppliedIndex < at:
		// Not yet caught up with its own addition.
		return &pb.PromoteResponse{Index: at}, nil
	}
	f := st.Raft().AddVoter(m.ID, m.Address, at, s.writeTimeout())
	if err := f.Error(); err != nil {
		return nil, raftChangeError("making manager "+req.NodeId+" a voter", err)
	}
	s.log.Info("manager promoted to voter", "node", req.NodeId)
	s.waitVotersHold(ctx, st, f.Index(), "manager "+req.NodeId+" a voter")
	return &pb.PromoteResponse{Voter: true}, nil
}

// waitVotersHold waits, for up to a heartbeat timeout, until every other
// voter has acknowledged the log up to index, the entry of a change that
// made change. A new voter's entry is committed once a majority of the
// new configuration holds it, which may leave out an older voter; were
// the leader lost then, that voter, still on the configuration before,
// would refuse the new voter's election (it knows no such voter) and
// could not win one without the leader, and the cluster would wait for
// the old leader to come back. Waiting for every voter that answers
// closes that: a voter silent for a heartbeat timeout is one an election
// would do without anyway.
func (s *Server) waitVotersHold(ctx context.Context, st *store.Store, index uint64, change string) {
	tr := s.transport()
	if tr == nil {
		return
	}
	cfg, _, err := raftConfig(st)
	if err != nil {
		return
	}
	bound := st.Raft().ReloadableConfig().HeartbeatTimeout
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(voterAckPoll)
	defer tick.Stop()
	for {
		behind := lagging(cfg, raft.ServerID(s.nodeID), index, tr.acknowledged())
		if len(behind) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			s.log.Warn("voters have not taken a membership change", "change", change, "index", index, "voters", behind, "waited", bound)
			return
		case <-tick.C:
		}
	}
}

// voterAckPoll is how often waitVotersHold looks at what the voters
// acknowledged (the leader sends heartbeats ten times a heartbeat
// timeout).
const voterAckPoll = 10 * time.Millisecond

// lagging is the addresses of cfg's voters, other than self, that have
// not acknowledged the log up to index (acked: by address).
func lagging(cfg raft.Configuration, self raft.ServerID, index uint64, acked map[string]uint64) []string {
	var out []string
	for _, m := range cfg.Servers {
		if m.Suffrage == raft.Voter && m.ID != self && acked[string(m.Address)] < index {
			out = append(out, string(m.Address))
		}
	}
	return out
}

// joinedWith checks, on a replica, that leaf is a certificate the
// cluster issued to the node it names and that the node was not removed
// since.
func joinedWith(st *store.Store, leaf *x509.Certificate) error {
	if leaf == nil {
		return status.Error(codes.Unauthenticated, "a manager certificate is required")
	}
	if err := dispatcher.Revoked(st, leaf); err != nil {
		return err
	}
	name := pki.IdentityOf(leaf).Name
	r, _, err := dispatcher.ReadCerts(st, name)
	switch {
	case err != nil:
		return toStatus(err)
	case r == nil:
		// The join's record may not have replicated here yet.
		return notApplied("manager %s: no certificate recorded for it on this replica yet", name)
	case !r.Holds(leaf):
		return status.Errorf(codes.PermissionDenied, "manager %s: the certificate presented (serial %s) is not one this cluster issued it", name, leaf.SerialNumber.Text(16))
	}
	return nil
}

// raftChangeError says why a membership change failed; a lost
// leadership is worth a retry (sent again as it is only when Raft
// refused the change before taking it).
func raftChangeError(what string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return notApplied("%s: no leader: an election is in progress", what)
	}
	if errors.Is(err, raft.ErrLeadershipLost) {
		return status.Errorf(codes.Unavailable, "%s: leadership was lost while the change was committed: it may still apply", what)
	}
	return status.Errorf(codes.Unavailable, "%s: %v", what, err)
}

// SetVoter is legion node promote and demote: it changes whether a
// manager votes in Raft. A worker is not made a manager this way (it has
// no manager certificate nor the CA key): it is deleted and joins again
// with the manager token.
func (c *clusterService) SetVoter(ctx context.Context, req *pb.SetVoterRequest) (*pb.SetVoterResponse, error) {
	s := c.s
	if req.Node == "" {
		return nil, status.Error(codes.InvalidArgument, "node: required")
	}
	st, conn, fctx, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).SetVoter(fctx, req)
	}
	cfg, at, err := raftConfig(st)
	if err != nil {
		return nil, toStatus(err)
	}
	m, ok := findServer(cfg, req.Node)
	if !ok {
		if _, _, err := st.Get(legion.KindNode, "", req.Node); err == nil {
			return nil, status.Errorf(codes.FailedPrecondition, "node %s is a worker: a worker becomes a manager by deleting its Node (legion delete node %s) and joining again with the manager token (legion token show manager) from an empty data directory",
				req.Node, req.Node)
		}
		return nil, status.Errorf(codes.NotFound, "node %s: no such manager", req.Node)
	}
	switch {
	case req.Voter && m.Suffrage == raft.Voter, !req.Voter && m.Suffrage != raft.Voter:
		return &pb.SetVoterResponse{}, nil
	case req.Voter:
		f := st.Raft().AddVoter(m.ID, m.Address, at, s.writeTimeout())
		if err := f.Error(); err != nil {
			return nil, raftChangeError("promoting manager "+req.Node, err)
		}
		s.waitVotersHold(ctx, st, f.Index(), "manager "+req.Node+" a voter")
	default:
		if voters(cfg) <= 1 {
			return nil, status.Errorf(codes.FailedPrecondition, "node %s is the only voting manager: demoting it would leave the cluster no quorum; promote or join another manager first", req.Node)
		}
		if err := st.Raft().DemoteVoter(m.ID, at, s.writeTimeout()).Error(); err != nil {
			return nil, raftChangeError("demoting manager "+req.Node, err)
		}
	}
	s.log.Info("manager suffrage changed", "node", req.Node, "voter", req.Voter)
	return &pb.SetVoterResponse{Changed: true}, nil
}

// removeManager takes the manager a deleted Node names out of Raft before
// the Node goes (nothing when it names no manager, or the Node is not
// there to delete as asked): it votes no more and its Raft calls are
// refused. The last voter is never removed, and the leader hands
// leadership over rather than remove itself mid-call.
func (s *Server) removeManager(st *store.Store, name string, pre store.Precondition) error {
	m, at, ok, err := managerToRemove(st, name, pre, nil)
	if err != nil || !ok {
		return err
	}
	if name == s.nodeID {
		if err := st.Raft().LeadershipTransfer().Error(); err != nil {
			return raftChangeError("handing leadership over before removing manager "+name, err)
		}
		return notApplied("manager %s led the cluster: leadership was handed to another manager first; ask again", name)
	}
	if err := st.Raft().RemoveServer(m.ID, at, s.writeTimeout()).Error(); err != nil {
		return raftChangeError("removing manager "+name+" from Raft", err)
	}
	s.log.Info("manager removed from raft", "node", name)
	return nil
}

// managerToRemove is the Raft member that deleting Node name at pre
// takes out, and the configuration's index it was read at; not ok when
// the node is no member (or the delete fails as it would have), an error
// when the removal is refused. gone, when not nil, says which Nodes to
// take as deleted already (a dry run's earlier deletes): their managers
// no longer vote.
func managerToRemove(st *store.Store, name string, pre store.Precondition, gone func(legion.Kind, string, string) bool) (m raft.Server, at uint64, ok bool, err error) {
	o, _, err := st.Get(legion.KindNode, "", name)
	if err != nil || pre.Version != 0 && o.GetMetadata().Version != pre.Version {
		return m, 0, false, nil // the delete fails as it would have
	}
	cfg, at, err := raftConfig(st)
	if err != nil {
		return m, 0, false, toStatus(err)
	}
	if m, ok = findServer(cfg, name); !ok {
		return m, 0, false, nil
	}
	left := voters(cfg)
	for _, v := range cfg.Servers {
		if gone != nil && v.Suffrage == raft.Voter && v.ID != m.ID && gone(legion.KindNode, "", string(v.ID)) {
			left--
		}
	}
	if m.Suffrage == raft.Voter && left <= 1 {
		return m, 0, false, status.Errorf(codes.FailedPrecondition, "node %s is the only voting manager: removing it would leave the cluster no quorum", name)
	}
	return m, at, true, nil
}

// managerRevoked refuses a manager certificate issued before its node was
// removed (dispatcher.Revoked), read from this manager's replica. It
// runs on every call a manager makes, Raft's included, so it looks the
// node up in the record of removals first.
func (s *Server) managerRevoked(ctx context.Context) error {
	st := s.store()
	leaf := leafOf(ctx)
	if st == nil || leaf == nil {
		return nil
	}
	removed, _, err := dispatcher.ReadRemoved(st)
	if err != nil {
		return notApplied("reading the removed nodes: %v", err)
	}
	if _, ok := removed.Nodes[pki.IdentityOf(leaf).Name]; !ok {
		return nil
	}
	return dispatcher.Revoked(st, leaf)
}

// selfRemoved reports whether this manager's own Raft configuration, once
// it has one, no longer lists it, or the other managers refused its Raft
// calls as a removed node's (transport.refusedAsRemoved): it was removed, and
// serves nothing but its status from then on. It reads the membership
// cached for up to membersTTL, as every call checks it.
func (s *Server) selfRemoved() bool {
	st := s.store()
	if st == nil {
		return false
	}
	if tr := s.transport(); tr != nil && tr.refusedAsRemoved() {
		return true
	}
	s.members.mu.Lock()
	defer s.members.mu.Unlock()
	s.members.refresh(st)
	return !s.members.none && !s.members.ids[s.nodeID]
}

// retire stops the Raft of a manager another refused as removed: still
// listed in its own configuration (removed while it was down), it would
// call an election every timeout, each refused, for as long as it runs.
// Its API already serves nothing but its status, which says it was
// removed; a restart runs Raft again and learns it again.
func (s *Server) retire(st *store.Store) {
	if err := st.Raft().Shutdown().Error(); err != nil {
		s.log.Warn("stopping the removed manager's raft", "err", err)
	}
	s.sayRemoved()
}

// sayRemoved logs, once, that this manager was removed and what brings
// its host back.
func (s *Server) sayRemoved() {
	s.removedSaid.Do(func() {
		s.log.Warn("manager "+s.nodeID+" was removed from the cluster: it serves only its status now and takes no part in Raft; "+
			"to bring this host back, stop its daemon, move its data directory aside and join again", "node", s.nodeID)
	})
}

// removedError answers calls to a manager taken out of the cluster.
func (s *Server) removedError() error {
	return status.Errorf(codes.PermissionDenied, "manager %s was removed from the cluster: it serves nothing more; ask another manager", s.nodeID)
}

// noLeader says why no leader is known: an election under way, or too
// few voting managers answering for one to be won. Then the cluster is
// frozen until enough are back, which "an election is in progress" does
// not tell, so the managers that do not answer are named.
func (s *Server) noLeader(ctx context.Context, st *store.Store) error {
	f, ok := s.frozen(ctx, st)
	if !ok {
		return notApplied("no leader: an election is in progress")
	}
	return notApplied("no leader: %s (legion status)", f)
}

// freeze is why no election can be won: too few of the voting managers
// answer.
type freeze struct {
	up, voters, majority int
	down                 []string // the voters that do not answer
}

// frozen probes the voting managers and reports whether too few answer
// for an election to be won.
func (s *Server) frozen(ctx context.Context, st *store.Store) (freeze, bool) {
	f := st.Raft().GetConfiguration()
	if f.Error() != nil {
		return freeze{}, false
	}
	var voters []*pb.Member
	for _, m := range f.Configuration().Servers {
		if m.Suffrage == raft.Voter {
			voters = append(voters, &pb.Member{Id: string(m.ID), Address: string(m.Address)})
		}
	}
	if len(voters) < 2 {
		return freeze{}, false // one voter elects itself
	}
	s.reach(ctx, voters)
	z := freeze{voters: len(voters), majority: Majority(len(voters))}
	for _, m := range voters {
		if m.Reachability == ReachUnreachable {
			z.down = append(z.down, m.Id)
		}
	}
	z.up = z.voters - len(z.down)
	return z, z.up < z.majority
}

func (z freeze) String() string {
	until := strings.Join(z.down, " and ") + " answer again"
	switch need := z.majority - z.up; {
	case len(z.down) == 1:
		until = z.down[0] + " answers again"
	case need < len(z.down):
		until = fmt.Sprintf("%d of %s answer again", need, strings.Join(z.down, ", "))
	}
	return fmt.Sprintf("%d of the %d voting managers answer, and electing one takes %d: the cluster is frozen until %s",
		z.up, z.voters, z.majority, until)
}

// reachProbe bounds how long a status waits for another manager to
// answer before calling it Unreachable.
const reachProbe = time.Second

// Reachability of a manager, as legion status shows it.
const (
	ReachLeader      = "Leader"
	ReachReachable   = "Reachable"
	ReachUnreachable = "Unreachable"
)

// reach fills in each member's reachability: the leader is Leader, this
// manager is reachable, and every other is asked for its status now.
func (s *Server) reach(ctx context.Context, members []*pb.Member) {
	done := make(chan struct{}, len(members))
	for _, m := range members {
		switch {
		case m.Leader && (m.Id == s.nodeID || s.probe(ctx, m.Address)):
			m.Reachability = ReachLeader
		case m.Leader:
			m.Reachability = ReachUnreachable
		case m.Id == s.nodeID:
			m.Reachability = ReachReachable
		default:
			go func() {
				defer func() { done <- struct{}{} }()
				m.Reachability = ReachUnreachable
				if s.probe(ctx, m.Address) {
					m.Reachability = ReachReachable
				}
			}()
			continue
		}
		done <- struct{}{}
	}
	for range members {
		<-done
	}
}

// probe reports whether the manager at addr answers a status call within
// reachProbe, over a connection of its own: the cached one may be waiting
// out its reconnection backoff, so a manager back from an outage would
// not be seen at once, and resetting that backoff (gRPC's
// ResetConnectBackoff) reads the channel's connections unlocked, a fatal
// concurrent map access when the channel makes one meanwhile (grpc-go
// pull request 9155; the race detector caught it here).
func (s *Server) probe(ctx context.Context, addr string) bool {
	conn, err := s.dial(addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, reachProbe)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, s.nodeID)
	_, err = pb.NewClusterClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(true))
	return err == nil
}
