package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
)

// DefaultPort is a manager's port.
const DefaultPort = 7470

// Protocol is the protocol this build speaks (3.8 "Versions").
const Protocol = 1

// MaxMessage is the largest gRPC message: room for JSON's expansion of a
// 1 MiB snapshot chunk and of large objects.
const MaxMessage = 64 << 20

const (
	roleManager = string(pki.RoleManager)
	roleWorker  = string(pki.RoleWorker)
)

// The files of a data directory.
const (
	NodeIDFile = "node-id"
	PKIDir     = "pki"
	// StoreKeyFile, in PKIDir, is the manager's data key: everything its
	// store writes is sealed under it (encryption at rest).
	StoreKeyFile = "store.key"
	AdminFile    = "admin.pem"
	roleFile     = "role"
	joinedFile   = "joined-through" // the manager address a join went through
)

// streamWorkers is how many long-lived goroutines serve the manager's
// calls. A goroutine made per call starts with a small stack that every
// write then grows, copying it (about a twentieth of a busy manager's CPU);
// a worker keeps the stack it grew. A call that finds every worker busy
// (agents' and members' streams hold one for their life) gets a goroutine
// of its own, as without the pool. The size is about the calls a busy
// manager has in flight: a pool of 1,024 gained nothing (64 writers, one
// manager), as the collector shrinks the stacks of workers left idle
// between their turns, which the next call grows again.
const streamWorkers = 128

// Config configures a daemon's port.
type Config struct {
	DataDir   string
	Listen    string // host:port; default 0.0.0.0:7470
	Advertise string // where other managers reach this one; default derived from Listen
	Timing    store.Timing
	// WriteTimeout bounds writes and linearizable reads without quorum
	// (default 30 s).
	WriteTimeout time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
	// CertLifetime is how long the certificates a manager issues last
	// (pki.CertLifetime when zero); each is renewed two thirds into it.
	CertLifetime time.Duration
	// RenewCheck is how often the node's certificate is checked for
	// renewal (an hour when zero).
	RenewCheck time.Duration
	// Metrics, when set, gets the manager's metrics (cluster/metrics):
	// its gRPC calls, Raft state and, on the leader, the cluster.
	Metrics prometheus.Registerer
	// Ranges completes and checks the address plan init was asked for
	// (unset ranges are zero prefixes) on this host: the daemon picks
	// free ones on the loopback network and refuses ranges overlapping
	// the host's networks. Nil fills unset ranges from addrplan.Default.
	Ranges func(asked addrplan.Plan) (addrplan.Plan, error)
}

// Server is a daemon's port: fresh, a manager, or a worker.
type Server struct {
	cfg    Config
	nodeID string
	lis    net.Listener
	grpc   *grpc.Server
	log    *slog.Logger

	// watchCtx ends every open watch at shutdown.
	watchCtx   context.Context
	endWatches context.CancelFunc
	joinMu     sync.Mutex // one init or join at a time
	// admit serialises the writes whose admission reads the cluster:
	// applies (apply.go) and volume restores (restore_admit.go).
	admit sync.Mutex

	mu      sync.Mutex
	state   string // "", manager, worker
	creds   *pki.Credentials
	ca      *pki.CA
	st      *store.Store
	tr      *transport
	conns   map[string]*grpc.ClientConn // to other managers, for forwarding
	fresh   tls.Certificate             // served before init or join
	peers   peerConns                   // connections with a verified certificate
	stopped bool

	wg          sync.WaitGroup // background work (promotion after a join, renewals)
	renewer     sync.Once      // starts keepRenewed once the node has credentials
	frozenW     sync.Once      // starts watchFrozen once the node is a manager
	removedSaid sync.Once      // sayRemoved logs once
	// managers lists the managers a worker's agent knows (UseManagers).
	managers atomic.Pointer[func() []string]
	members  members // for checking who makes Raft calls

	// disp serves agents (registration, heartbeats, assignments, status).
	disp *dispatcher.Service
	lock *DataDirLock // held from New to the end of shutdown
	// al holds the private keys while they are sealed (autolock.go).
	al autolockState
	// sess serves sessions and moves volume data between nodes.
	sess *sessions.Service
	// audit holds the events recorded here until they are written.
	audit *audit.Recorder
	// events holds the events derived from what this manager applied.
	events eventFeed
}

// Credentials are the node's certificate and key once it belongs to a
// cluster (nil before init or join).
func (s *Server) Credentials() *pki.Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creds
}

// Dispatcher is the manager's service for agents; its heartbeats and
// usage reports are what the controller loop plans with.
func (s *Server) Dispatcher() *dispatcher.Service { return s.disp }

// Sessions is the manager's sessions service, through which the leader's
// migrator copies volume data between nodes.
func (s *Server) Sessions() *sessions.Service { return s.sess }

// leaderConn reaches the leader for calls that run there (nil when this
// manager leads).
func (s *Server) leaderConn(ctx context.Context) (grpc.ClientConnInterface, context.Context, error) {
	_, conn, fctx, err := s.leader(ctx)
	if err != nil || conn == nil {
		return nil, ctx, err
	}
	return conn, fctx, nil
}

// New prepares a daemon's port on its data directory: it reads (or makes)
// the node id, and if the node already belongs to a cluster its
// certificates, and for a manager opens the store, which rejoins the
// cluster from disk. It listens at once; Serve answers.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = fmt.Sprintf("0.0.0.0:%d", DefaultPort)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	lock, err := LockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	id, err := nodeID(cfg.DataDir)
	if err != nil {
		lock.Release()
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		lock.Release()
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listening on %s: another process listens there (another cluster's daemon or legion up?): give this one another address (--listen): %w", cfg.Listen, err)
		}
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = advertiseFor(lis.Addr().String())
	}
	s := &Server{cfg: cfg, nodeID: id, lis: lis, log: cfg.Logger, conns: map[string]*grpc.ClientConn{}, lock: lock}
	s.audit = audit.NewRecorder(audit.DefaultHold, cfg.Logger)
	s.watchCtx, s.endWatches = context.WithCancel(context.Background())
	ca, err := pki.NewCA(cfg.Now())
	if err != nil {
		lis.Close()
		lock.Release()
		return nil, err
	}
	s.fresh = tls.Certificate{Certificate: [][]byte{ca.Cert.Raw}, PrivateKey: ca.Key}
	calls, err := s.callOptions()
	if err != nil {
		lis.Close()
		lock.Release()
		return nil, err
	}
	if err := s.load(); err != nil {
		lis.Close()
		lock.Release()
		return nil, err
	}
	s.grpc = grpc.NewServer(append([]grpc.ServerOption{
		grpc.Creds(trackedCreds{TransportCredentials: credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: s.serverTLS}),
			conns: &s.peers, trusts: s.trusts}),
		grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage),
		grpc.InitialWindowSize(pb.StreamWindow), grpc.InitialConnWindowSize(pb.StreamWindow),
		grpc.NumStreamWorkers(streamWorkers),
	}, calls...)...)
	pb.RegisterObjectsServer(s.grpc, &objectsService{s: s})
	pb.RegisterClusterServer(s.grpc, &clusterService{s: s})
	pb.RegisterRaftServer(s.grpc, &raftService{current: s.transport, member: s.checkMember, stopping: s.watchCtx.Done()})
	s.disp = dispatcher.New(s, dispatcher.Options{Logger: s.log, Issue: s.issueRenewal, Leader: s.leaderConn})
	if st := s.store(); st != nil {
		// Agents whose streams move here after a failover resume.
		s.disp.Follow(st)
	}
	s.disp.RegisterOn(s.grpc)
	s.sess = sessions.New(sessions.FromStore(s.Store), sessions.Options{Logger: s.log, Stopping: s.watchCtx.Done(), Leader: s.leaderConn, Now: s.cfg.Now,
		AdmitVolume: s.admitRestore})
	s.sess.RegisterOn(s.grpc)
	return s, nil
}

// advertiseFor makes a listening address reachable: an unspecified host
// becomes the loopback address.
func advertiseFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// nodeID reads <data-dir>/node-id, making a random 64-bit id on first
// start.
func nodeID(dir string) (string, error) {
	p := filepath.Join(dir, NodeIDFile)
	data, err := os.ReadFile(p)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("node id: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%016x", binary.BigEndian.Uint64(b[:]))
	if err := pki.WriteFile(p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// load reads the node's certificates and role; a manager opens its store.
func (s *Server) load() error {
	files, err := s.loadNodeFiles()
	if errors.Is(err, pki.ErrNoPKI) {
		return nil
	}
	if errors.Is(err, pki.ErrLocked) {
		return s.setLocked()
	}
	if err != nil {
		return err
	}
	role, err := os.ReadFile(filepath.Join(s.cfg.DataDir, roleFile))
	if err != nil {
		return fmt.Errorf("reading the node's role: %w", err)
	}
	if err := s.become(strings.TrimSpace(string(role)), files, false); err != nil {
		return err
	}
	// A manager that restarted before its join made it a voter asks again.
	if st := s.store(); st != nil && s.unfinishedJoin(st) {
		s.keepJoining()
	}
	return nil
}

// become makes the daemon a manager or worker with its certificates; a
// manager opens its store (bootstrapping a new cluster when asked).
func (s *Server) become(role string, files *pki.NodeFiles, bootstrap bool) error {
	creds, err := files.Credentials()
	if err != nil {
		return err
	}
	ca, err := files.CA()
	if err != nil {
		return err
	}
	ca.Lifetime = s.cfg.CertLifetime
	s.mu.Lock()
	s.creds, s.ca = creds, ca
	s.mu.Unlock()
	s.renewer.Do(func() {
		s.wg.Add(1)
		go s.keepRenewed()
	})
	if role != roleManager {
		s.mu.Lock()
		s.state = role
		s.mu.Unlock()
		return nil
	}
	key, err := s.storeKey()
	if err != nil {
		return err
	}
	tr := newTransport(s.cfg.Advertise, s.dial)
	st, err := store.Open(store.Config{Dir: s.cfg.DataDir, ID: s.nodeID, Transport: tr, Timing: s.cfg.Timing,
		WriteTimeout: s.cfg.WriteTimeout, Logger: s.log, Key: key})
	if err != nil {
		return err
	}
	tr.whenRemoved(func() { s.retire(st) })
	if bootstrap {
		if err := st.Bootstrap(s.cfg.Advertise); err != nil {
			st.Close()
			return err
		}
	}
	s.mu.Lock()
	s.st, s.tr, s.state = st, tr, roleManager
	s.mu.Unlock()
	s.startEvents(st)
	if s.disp != nil { // at start it is made after this, and follows there
		s.disp.Follow(st)
	}
	s.startAutolock()
	s.frozenW.Do(func() {
		s.wg.Add(1)
		go s.watchFrozen()
	})
	s.log.Info("serving as a manager", "node", s.nodeID, "advertise", s.cfg.Advertise)
	return nil
}

func (s *Server) role() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Server) store() *store.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *Server) transport() *transport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr
}

// serverTLS picks the TLS configuration per connection, so init and join
// take effect without a restart.
func (s *Server) serverTLS(*tls.ClientHelloInfo) (*tls.Config, error) {
	s.mu.Lock()
	creds := s.creds
	s.mu.Unlock()
	if creds == nil {
		return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{s.fresh}, NextProtos: []string{"h2"}}, nil
	}
	c := creds.ServerConfig()
	c.NextProtos = []string{"h2"}
	return c, nil
}

// trusts says whether a peer's certificates chain to a CA this daemon
// trusts now.
func (s *Server) trusts(peer []*x509.Certificate) bool {
	creds := s.Credentials()
	return creds != nil && creds.Trusts(peer)
}

// dial opens a connection to another manager with the node's certificate.
func (s *Server) dial(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	creds := s.creds
	s.mu.Unlock()
	if creds == nil {
		return nil, errors.New("no certificate yet")
	}
	return grpc.NewClient(addr, slices.Concat(peerCallOptions(addr), pb.FixedWindows(), []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: redialTimeout,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: redialMax}})})...)
}

// How a manager reconnects to another. gRPC's default backoff grows to
// two minutes, so a manager back from an outage (or a joiner whose first
// contact failed) would wait that long for Raft and forwarding, over and
// above Raft's own backoff.
const (
	redialMax     = time.Second     // the longest wait between attempts
	redialTimeout = 5 * time.Second // one attempt
)

// peer returns a cached connection to another manager (for forwarding).
func (s *Server) peer(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	c, ok := s.conns[addr]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		c.Close()
		return nil, errors.New("shutting down")
	}
	if old, ok := s.conns[addr]; ok {
		c.Close()
		return old, nil
	}
	s.conns[addr] = c
	return c, nil
}

// JoinedThrough is the manager address this daemon joined its cluster
// through (nothing for the cluster's first manager or before a join).
func (s *Server) JoinedThrough() []string {
	data, err := os.ReadFile(filepath.Join(s.cfg.DataDir, joinedFile))
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// NodeID is this daemon's node id.
func (s *Server) NodeID() string { return s.nodeID }

// Addr is the address the port listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Advertise is where other managers reach this one.
func (s *Server) Advertise() string { return s.cfg.Advertise }

// Store is the manager's store (nil unless a manager).
func (s *Server) Store() *store.Store { return s.store() }

// Serve answers calls until Stop or Kill.
func (s *Server) Serve() error {
	err := s.grpc.Serve(s.lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop is the SIGTERM path: stop taking calls, end open watches with
// UNAVAILABLE, wait for calls in flight (at most 10 s), then close the
// store.
func (s *Server) Stop() {
	s.endWatches()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.grpc.Stop()
		<-done
	}
	s.shutdown()
}

// Kill stops at once, as a crash would (in-flight calls fail), then closes
// the store so the directory can be opened again. Raft's transport is cut
// first: the store closes only after the background work has ended, and
// meanwhile a killed leader went on heartbeating its followers, so they
// elected no one for up to 5 s after the kill (scale runs counted that
// in the election).
func (s *Server) Kill() {
	if tr := s.transport(); tr != nil {
		tr.Close()
	}
	s.endWatches()
	s.grpc.Stop()
	s.shutdown()
}

func (s *Server) shutdown() {
	s.mu.Lock()
	s.stopped = true
	conns := s.conns
	s.conns = map[string]*grpc.ClientConn{}
	st := s.st
	s.mu.Unlock()
	s.wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	if st != nil {
		if err := st.Close(); err != nil {
			s.log.Error("closing the store", "err", err)
		}
	}
	s.lock.Release()
}

// stopping reports whether shutdown began (background work ends).
func (s *Server) stopping() <-chan struct{} { return s.watchCtx.Done() }
