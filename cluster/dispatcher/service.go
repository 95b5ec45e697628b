package dispatcher

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/legionbsd/legion/netbsd/addrplan"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// Source gives the manager's store: nil while the daemon is no manager
// (before init or join, or a worker). *server.Server is one.
type Source interface {
	Store() *store.Store
}

// Fixed is a Source of one store.
func Fixed(st *store.Store) Source { return fixed{st} }

type fixed struct{ st *store.Store }

func (f fixed) Store() *store.Store { return f.st }

// SourceFunc is a Source read through a function, for a server made after
// the Service.
type SourceFunc func() *store.Store

// Store implements Source.
func (f SourceFunc) Store() *store.Store { return f() }

// Peers reports the leader's advertised address (empty when none is
// known) and every manager's.
type Peers func() (leader string, managers []string)

// Service is the Dispatcher of one manager.
type Service struct {
	legionpb.UnimplementedDispatcherServer

	src   Source
	peers Peers
	now   func() time.Time
	log   *slog.Logger
	check time.Duration
	issue func(csrPEM []byte, id pki.Identity) ([]byte, error)
	lead  LeaderConn

	mu    sync.Mutex
	beats map[string]time.Time
	usage map[string][]legion.Usage // by node: its last heartbeat's report

	cmu   sync.Mutex
	cache *viewCache // the replica's state for the streams; see cacheOf

	passes passes // certificates that passed holds lately; see holdsStill
}

// Options tune a Service; the zero value serves production.
type Options struct {
	// Peers lists the managers agents may reach. Nil reads the Raft
	// configuration: a manager's port carries Raft, so its Raft address is
	// the one agents dial.
	Peers  Peers
	Now    func() time.Time
	Logger *slog.Logger
	// Check is how often an open stream checks that its replica still
	// follows a leader, and how long a follower may take to catch up
	// before serving one; zero means CheckInterval.
	Check time.Duration
	// Issue signs a renewal's certificate request for the node the
	// calling certificate names; nil refuses renewals.
	Issue func(csrPEM []byte, id pki.Identity) ([]byte, error)
	// Leader gives a follower a connection to the leader (and the context
	// marking the call forwarded), so heartbeats and reports a node sends
	// to a follower reach the leader; nil refuses them with NotLeader.
	Leader LeaderConn
}

// LeaderConn returns a connection to the leader and the context to call it
// with, or a nil connection when this manager leads.
type LeaderConn func(ctx context.Context) (grpc.ClientConnInterface, context.Context, error)

// CheckInterval is how often open streams check their replica.
const CheckInterval = 5 * time.Second

// New makes the Dispatcher of the manager whose store src gives.
func New(src Source, o Options) *Service {
	s := &Service{src: src, peers: o.Peers, now: o.Now, log: o.Logger, check: o.Check, issue: o.Issue, lead: o.Leader,
		beats: map[string]time.Time{}, usage: map[string][]legion.Usage{}}
	if s.peers == nil {
		s.peers = raftPeers(src)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.check <= 0 {
		s.check = CheckInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// RegisterOn adds the service to a gRPC server (the manager's port).
func (s *Service) RegisterOn(g grpc.ServiceRegistrar) { legionpb.RegisterDispatcherServer(g, s) }

func raftPeers(src Source) Peers {
	return func() (string, []string) {
		st := src.Store()
		if st == nil {
			return "", nil
		}
		leader, _ := st.Leader()
		f := st.Raft().GetConfiguration()
		if f.Error() != nil {
			return leader, nil
		}
		var all []string
		for _, srv := range f.Configuration().Servers {
			all = append(all, string(srv.Address))
		}
		return leader, all
	}
}

// caller returns the node the call's client certificate names, and that
// certificate. asked is the node the request names, if any: it must be
// the same. Whether the certificate is one the cluster issued that node is
// checked apart (holds), against a replica.
func caller(ctx context.Context, asked string) (pki.Identity, *x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return pki.Identity{}, nil, status.Error(codes.Unauthenticated, "a node certificate of this cluster is required")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return pki.Identity{}, nil, status.Error(codes.Unauthenticated, "a node certificate of this cluster is required")
	}
	leaf := ti.State.PeerCertificates[0]
	id := pki.IdentityOf(leaf)
	if id.Role != pki.RoleWorker && id.Role != pki.RoleManager {
		return pki.Identity{}, nil, status.Errorf(codes.PermissionDenied, "the dispatcher serves nodes: %s holds a %s certificate", id.Name, id.Role)
	}
	if asked != "" && asked != id.Name {
		return pki.Identity{}, nil, status.Errorf(codes.PermissionDenied, "node %s may act only for itself, not for node %s", id.Name, asked)
	}
	return id, leaf, nil
}

// replica is this manager's store; a daemon that is no manager sends the
// agent to another.
func (s *Service) replica() (*store.Store, error) {
	st := s.src.Store()
	if st == nil {
		return nil, status.Error(codes.Unavailable, "this daemon is not a manager of a cluster: ask another manager")
	}
	return st, nil
}

// leaderStore is the store when this manager leads; a follower refuses,
// naming the leader.
func (s *Service) leaderStore() (*store.Store, error) {
	st, err := s.replica()
	if err != nil {
		return nil, err
	}
	if st.IsLeader() {
		return st, nil
	}
	leader, _ := s.peers()
	return nil, notLeader(leader)
}

// notLeader is the refusal of a manager that does not lead: the node
// calls the leader named, or waits. With no leader known the dispatcher
// cannot tell an election from a cluster frozen without its majority
// (the API probes the voters for that; legion status shows them), so it
// names both.
func notLeader(leader string) error {
	msg := "this manager is not the leader and knows of none: an election is under way, or too few voting managers answer for one to be won (legion status on a manager says which)"
	if leader != "" {
		msg = "this manager is not the leader: the leader is at " + leader
	}
	st, err := status.New(codes.Unavailable, msg).WithDetails(&legionpb.NotLeader{Leader: leader})
	if err != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}

// statusOf turns a store error into the status agents branch on.
func (s *Service) statusOf(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, store.ErrNotLeader):
		leader, _ := s.peers()
		return notLeader(leader)
	case errors.Is(err, store.ErrNoQuorum), errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, addrplan.ErrExhausted):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// maxAttempts bounds the retries of a write that lost a version race.
const maxAttempts = 10

// following checks that a replica serves current data: the leader's does;
// a follower's must follow a leader and have applied what that leader had
// committed when asked (within the check interval). One cut off from the
// leader sends the agent to another manager. A stream already open
// (open false) is kept through an election.
func (s *Service) following(ctx context.Context, st *store.Store, open bool) error {
	if st.IsLeader() {
		return nil
	}
	if leader, _ := st.Leader(); leader == "" {
		// An open stream outlasts an election: nothing commits without a
		// leader, so the replica is no further behind than any other, and
		// ending every follower's streams at each election sends every
		// agent on them a whole set again (at 20,000 tasks, megabytes
		// each, all at once). A replica leaderless for longer than an
		// election takes is taken for cut off, and its streams end.
		if !open && time.Since(st.LastContact()) < st.ElectionBound() {
			return nil
		}
		return status.Error(codes.Unavailable, "this manager follows no leader, so its replica may be behind: ask another manager")
	}
	target := st.Raft().CommitIndex()
	deadline := time.NewTimer(s.check)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for st.Raft().AppliedIndex() < target {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-deadline.C:
			return status.Errorf(codes.Unavailable, "this manager's replica did not catch up with the leader within %s: ask another manager", s.check)
		case <-tick.C:
		}
	}
	return nil
}
