package dispatcherclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// Defaults.
const (
	// CallTimeout bounds one unary call to one manager.
	CallTimeout = 5 * time.Second
	// Keepalive is the default probe interval of idle connections.
	Keepalive = 5 * time.Minute
	// maxMessage is the largest assignment set taken: values are up to
	// 500 KiB each.
	maxMessage = 256 << 20
)

// Config sets a Session up.
type Config struct {
	// Node is this node's name; empty means the one its certificate names
	// (a manager refuses any other).
	Node string
	// Managers are the addresses to start from; heartbeat replies add the
	// cluster's current ones.
	Managers []string
	// TLS is the node's client configuration (pki.Credentials.ClientConfig).
	TLS *tls.Config
	// Status is what the node reports of itself at registration.
	Status func() legion.NodeStatus
	// Usage is what the node's tasks use, sent with each heartbeat.
	Usage  func() []legion.Usage
	Logger *slog.Logger
	// Backoff is the first wait after a failed attempt, doubled up to the
	// heartbeat period; zero means 100 ms.
	Backoff time.Duration
	// CallTimeout bounds one unary call to one manager; zero means
	// CallTimeout.
	CallTimeout time.Duration
	// OnAssignments, when set, is told of each message of the assignments
	// stream once taken. For measuring (internal/scale).
	OnAssignments func(Message)
	// OnStreamEnd, when set, is told why each assignments stream ended
	// (before the next is opened, which resumes from where the node's
	// state is, or starts with a whole set). For measuring.
	OnStreamEnd func(err error)
	// Keepalive is how often an idle connection to a manager is probed, so
	// a stream from a host that went silent ends; zero means Keepalive.
	// Managers refuse probes more frequent than their enforcement policy
	// allows (gRPC's default: 5 minutes).
	Keepalive time.Duration
}

// Session is one node's link to the managers.
type Session struct {
	cfg  Config
	log  *slog.Logger
	base context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	addrs   []string // every manager known, seeds first until replies say otherwise
	leader  string   // where writes go first
	stream  string   // the manager the assignments stream uses
	period  time.Duration
	podCIDR string
	svcCIDR string
	conns   map[string]*grpc.ClientConn
	// cutStream ends the assignments stream, which runs on streamOn.
	cutStream context.CancelFunc
	streamOn  string
	// streamHeard is when the stream last delivered a message.
	streamHeard time.Time
	// streamWake ends the stream's wait before its next attempt: a
	// heartbeat answered while no stream runs says a manager is reachable
	// again, and the node should learn at once what changed while it was
	// away (tasks given to others), not after the rest of a backoff.
	streamWake chan struct{}
	// statusChanged asks the heartbeat loop to register again: the node's
	// own status (Config.Status) changed between registrations.
	statusChanged chan struct{}
	// leaderCalls counts the calls a leader took (LeaderCalls).
	leaderCalls atomic.Uint64
	// held is the node's state as the last stream left it, which the
	// next stream resumes from (assignments.go).
	held held
	// removed is closed when a manager refuses the node's certificate
	// because the node was removed from the cluster (removedErr says so):
	// heartbeats and the stream stop asking from then on.
	removed    chan struct{}
	removedErr error

	// beatMu is held for a whole beat: one at a time uses the stream.
	beatMu sync.Mutex
	// beats is the heartbeat stream open to a manager, nil when none is.
	beats *beatStream
	// noStream are the managers without a heartbeat stream (older than
	// it), with how many beats went to each as calls since it said so.
	noStream map[string]int
}

var _ agent.Manager = (*Session)(nil)

// New makes a Session; nothing is dialled until it is used.
func New(cfg Config) (*Session, error) {
	if len(cfg.Managers) == 0 {
		return nil, errors.New("session: managers: at least one address is needed")
	}
	if cfg.TLS == nil {
		return nil, errors.New("session: TLS: the node's client credentials are needed")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = CallTimeout
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = Keepalive
	}
	base, stop := context.WithCancel(context.Background())
	return &Session{cfg: cfg, log: cfg.Logger, base: base, stop: stop,
		addrs: dedup(cfg.Managers), period: legion.HeartbeatPeriod, conns: map[string]*grpc.ClientConn{},
		streamWake: make(chan struct{}, 1), statusChanged: make(chan struct{}, 1), removed: make(chan struct{}),
		noStream: map[string]int{}}, nil
}

// StatusChanged tells the session that what Config.Status reports changed
// (a published port the node cannot serve, say): the node registers again
// soon, which records the new status. Registration is otherwise at start
// only, and heartbeats carry usage alone. It never blocks; changes made
// while one is pending are sent with it.
func (s *Session) StatusChanged() {
	select {
	case s.statusChanged <- struct{}{}:
	default:
	}
}

// Start registers the node, trying every manager until one leader takes
// it or ctx ends, sends a first heartbeat (learning the managers), then
// sends heartbeats until ctx ends or Close.
func (s *Session) Start(ctx context.Context) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	// A first heartbeat at once: its reply names the cluster's managers,
	// which registration does not, so a node cut off from the one it
	// registered with a moment later still has the others to go to.
	if err := s.heartbeat(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("heartbeat failed", "err", err)
	}
	hctx, cancel := s.scope(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.heartbeats(hctx)
	}()
	return nil
}

// Close stops what the Session runs and closes its connections.
func (s *Session) Close() error {
	s.stop()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for addr, c := range s.conns {
		errs = append(errs, c.Close())
		delete(s.conns, addr)
	}
	return errors.Join(errs...)
}

// Removed is closed once a manager refused the node because it was
// removed from the cluster (legion node rm, legion delete node): the
// managers gave its tasks to other nodes and will not hear from it
// again, so whoever runs the node stops what it runs. The Session asks
// the managers nothing more.
func (s *Session) Removed() <-chan struct{} { return s.removed }

// RemovedErr is the managers' refusal that closed Removed, nil before.
func (s *Session) RemovedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removedErr
}

// noteRemoved closes Removed if err is the refusal of a removed node,
// and reports whether it is.
func (s *Session) noteRemoved(err error) bool {
	msg, ok := legionpb.NodeRemovedMessage(err)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removedErr == nil {
		s.removedErr = errors.New(msg) // the managers' words, without the call's and gRPC's
		close(s.removed)
		s.log.Error("this node was removed from the cluster", "err", err)
	}
	return true
}

// PodCIDR is the pod subnet the managers gave the node (empty before
// registration).
func (s *Session) PodCIDR() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.podCIDR
}

// ServiceCIDR is the cluster's service range the managers gave the node
// (empty before registration, or from a manager that predates it).
func (s *Session) ServiceCIDR() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.svcCIDR
}

// Managers are the managers' addresses as last learned.
func (s *Session) Managers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addrs)
}

// scope is ctx, also ended by Close.
func (s *Session) scope(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.base, cancel)
	return c, func() { stop(); cancel() }
}

func (s *Session) client(addr string) (legionpb.DispatcherClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base.Err() != nil {
		return nil, errors.New("session closed")
	}
	c, ok := s.conns[addr]
	if !ok {
		var err error
		c, err = grpc.NewClient(addr, append(legionpb.FixedWindows(), grpc.WithTransportCredentials(credentials.NewTLS(s.cfg.TLS)),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: s.cfg.Keepalive, Timeout: s.cfg.CallTimeout}),
			grpc.WithConnectParams(connectParams()))...)
		if err != nil {
			return nil, fmt.Errorf("manager %s: %w", addr, err)
		}
		s.conns[addr] = c
	}
	return legionpb.NewDispatcherClient(c), nil
}

// connectParams bound gRPC's wait between attempts to reach a manager by
// one heartbeat period (its default grows to two minutes): a node cut off
// for a while is heard from again within a period of its network coming
// back, not after minutes taken for down.
func connectParams() grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.MaxDelay = legion.HeartbeatPeriod
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: 20 * time.Second}
}

// register records the node with the leader, trying again after every
// failed round until ctx ends.
func (s *Session) register(ctx context.Context) error {
	st := legion.NodeStatus{}
	if s.cfg.Status != nil {
		st = s.cfg.Status()
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	wait := s.cfg.Backoff
	for {
		err := s.write(ctx, "register", func(ctx context.Context, c legionpb.DispatcherClient) error {
			r, err := c.Register(ctx, &legionpb.RegisterRequest{Node: s.cfg.Node, Status: data})
			if err == nil {
				s.mu.Lock()
				s.podCIDR, s.svcCIDR = r.GetPodCidr(), r.GetServiceCidr()
				s.mu.Unlock()
			}
			return err
		})
		if err == nil || !failover(err) {
			return err
		}
		s.log.Warn("registration failed, trying again", "err", err, "in", wait)
		if !sleep(ctx, wait) {
			return fmt.Errorf("registering node: %w (last: %w)", ctx.Err(), err)
		}
		wait = min(2*wait, s.currentPeriod())
	}
}

// wakeStream cuts short the assignments stream's wait for its next
// attempt, if it waits.
func (s *Session) wakeStream() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutStream != nil {
		return
	}
	select {
	case s.streamWake <- struct{}{}:
	default:
	}
}

func (s *Session) currentPeriod() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.period
}

// Report implements agent.Manager: the task's status goes to the leader.
func (s *Session) Report(ctx context.Context, namespace, name, uid string, st legion.TaskStatus) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("task %s/%s: status: %w", namespace, name, err)
	}
	req := &legionpb.ReportRequest{Node: s.cfg.Node, Namespace: namespace, Name: name, Uid: uid, Status: data}
	return s.write(ctx, "report of task "+namespace+"/"+name, func(ctx context.Context, c legionpb.DispatcherClient) error {
		_, err := c.Report(ctx, req)
		return err
	})
}

// LeaderCalls implements agent.Manager: the calls that needed the leader
// (registrations, heartbeats, reports, claims) and were taken. Heartbeats
// keep it moving every period while a leader is there.
func (s *Session) LeaderCalls() uint64 { return s.leaderCalls.Load() }

// write makes a call that needs the leader: to the leader last known,
// then to the one a follower names, then to every other manager. It
// returns the last failure when none took it.
func (s *Session) write(ctx context.Context, what string, call func(context.Context, legionpb.DispatcherClient) error) error {
	return s.writeTo(ctx, what, s.cfg.CallTimeout, func(ctx context.Context, _ string, c legionpb.DispatcherClient) error { return call(ctx, c) })
}

// writeTo is write with each manager given at most d to answer (at most
// CallTimeout), and the call told which manager it reaches.
func (s *Session) writeTo(ctx context.Context, what string, d time.Duration, call func(ctx context.Context, addr string, c legionpb.DispatcherClient) error) error {
	if d <= 0 || d > s.cfg.CallTimeout {
		d = s.cfg.CallTimeout
	}
	s.mu.Lock()
	next := dedup(append([]string{s.leader}, s.addrs...))
	s.mu.Unlock()
	tried := map[string]bool{}
	var last error
	for len(next) > 0 {
		addr := next[0]
		next = next[1:]
		if addr == "" || tried[addr] {
			continue
		}
		tried[addr] = true
		c, err := s.client(addr)
		if err != nil {
			last = err
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, d)
		err = call(cctx, addr, c)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.leader = addr
			s.mu.Unlock()
			s.leaderCalls.Add(1)
			return nil
		}
		last = fmt.Errorf("%s at %s: %w", what, addr, err)
		if ctx.Err() != nil || s.noteRemoved(err) {
			return last
		}
		if !failover(err) {
			return last
		}
		if status.Code(err) == codes.DeadlineExceeded && d == s.cfg.CallTimeout {
			// A manager that does not answer in time may have gone silent
			// without closing its connections (a heartbeat's shorter wait
			// says too little to leave a stream for): its stream would wait
			// forever, so it moves too.
			s.abandon(addr)
		}
		if l := leaderOf(err); l != "" && !tried[l] {
			next = append([]string{l}, next...)
		}
	}
	if last == nil {
		return fmt.Errorf("%w: %s: no manager to ask", agent.ErrNoManager, what)
	}
	// Every manager asked failed over: the same call may succeed later.
	return fmt.Errorf("%w: %w", agent.ErrNoManager, last)
}

// abandon ends the assignments stream if it runs on addr; it opens again
// on the next manager.
func (s *Session) abandon(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A stream that delivers is from a manager that is not silent: a
	// write it was slow to answer waited on the store, which another
	// manager's would too, and leaving costs a whole set (megabytes at
	// scale, to every node that left at once).
	if s.streamOn == addr && s.cutStream != nil && time.Since(s.streamHeard) >= s.cfg.CallTimeout {
		s.log.Warn("manager did not answer in time: leaving its assignments stream", "manager", addr)
		s.cutStream()
	}
}

// failover reports whether another manager may answer where this one
// could not (status.Code sees through wrapping).
func failover(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// leaderOf reads the leader a follower named in its refusal.
func leaderOf(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if nl, ok := d.(*legionpb.NotLeader); ok {
			return nl.GetLeader()
		}
	}
	return ""
}

func dedup(addrs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range addrs {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// sleep waits d unless ctx ends first, reporting whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
