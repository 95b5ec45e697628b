package sessions

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/rbac"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Objects reads the manager's replica; *store.Store is one.
type Objects interface {
	Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error)
	List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)
}

// Source gives the objects to read, nil while the daemon is no manager.
type Source func() Objects

// FromStore is a Source over a store getter such as (*server.Server).Store,
// which gives nil before the daemon is a manager.
func FromStore(get func() *store.Store) Source {
	return func() Objects {
		if st := get(); st != nil {
			return st
		}
		return nil
	}
}

// DefaultAttachTimeout is how long a manager waits for the agent to
// answer an offer.
const DefaultAttachTimeout = 10 * time.Second

// Options tune a Service; the zero value serves production.
type Options struct {
	Logger *slog.Logger
	// AttachTimeout bounds the wait for the agent's Attach; zero means
	// DefaultAttachTimeout.
	AttachTimeout time.Duration
	// Stopping, when closed, ends every open stream with UNAVAILABLE, so a
	// graceful stop of the gRPC server is not held up by them.
	Stopping <-chan struct{}
	// Leader reaches the leader, to which a follower forwards volume
	// backups and restores; nil, they are served only by a leader.
	Leader Leader
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// AdmitVolume admits the Volume a restore makes as an apply of it by
	// the caller would be (quotas, the Namespace's allow-lists), and with
	// write set calls it while no apply is admitted, so the two cannot
	// both take the last of a quota. Nil admits every restore.
	AdmitVolume func(ctx context.Context, v *legion.Volume, write func() error) error
}

// Service serves Pods and Sessions on one manager.
type Service struct {
	src      Source
	log      *slog.Logger
	attachIn time.Duration
	stopping <-chan struct{}
	leader   Leader
	now      func() time.Time
	admitVol func(ctx context.Context, v *legion.Volume, write func() error) error

	mu       sync.Mutex
	agents   map[string]*agentConn // by node name: its newest Sessions stream
	sessions map[string]*session   // offered, by id
}

// New makes the service of the manager whose objects src gives.
func New(src Source, o Options) *Service {
	s := &Service{src: src, log: o.Logger, attachIn: o.AttachTimeout, stopping: o.Stopping, leader: o.Leader, now: o.Now,
		admitVol: o.AdmitVolume, agents: map[string]*agentConn{}, sessions: map[string]*session{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.attachIn <= 0 {
		s.attachIn = DefaultAttachTimeout
	}
	if s.admitVol == nil {
		s.admitVol = func(_ context.Context, _ *legion.Volume, write func() error) error {
			if write == nil {
				return nil
			}
			return write()
		}
	}
	return s
}

// RegisterOn adds Pods, Sessions and Volumes to a gRPC server (the
// manager's port).
func (s *Service) RegisterOn(g grpc.ServiceRegistrar) {
	legionpb.RegisterPodsServer(g, podsServer{s: s})
	legionpb.RegisterSessionsServer(g, sessionsServer{s: s})
	legionpb.RegisterVolumesServer(g, volumesServer{s: s})
}

// identity is the verified client certificate's identity.
func identity(ctx context.Context) (pki.Identity, bool) {
	id, _, ok := peerCert(ctx)
	return id, ok
}

// peerCert is the verified client certificate, and who it names.
func peerCert(ctx context.Context) (pki.Identity, *x509.Certificate, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return pki.Identity{}, nil, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return pki.Identity{}, nil, false
	}
	leaf := ti.State.PeerCertificates[0]
	return pki.IdentityOf(leaf), leaf, true
}

// user checks the caller of Pods: the cluster admin, a manager, or a user,
// whose RoleBindings allowed then checks once the task is known.
func user(ctx context.Context, verb string) (pki.Identity, error) {
	id, ok := identity(ctx)
	if !ok {
		return id, status.Error(codes.Unauthenticated, "a client certificate of this cluster is required")
	}
	if id.Role != pki.RoleAdmin && id.Role != pki.RoleManager && id.Role != pki.RoleUser {
		return id, status.Errorf(codes.PermissionDenied, "%s: not allowed for a %s certificate (%s)", verb, id.Role, id.Name)
	}
	return id, nil
}

// allowed checks a user's RoleBindings for a session in a namespace (3.8:
// logs take view, exec and port-forward edit); the cluster admin and
// managers may do anything.
func allowed(objs Objects, id pki.Identity, v rbac.Verb, what, namespace string) error {
	// A session reads or writes the pod, as a Task of the namespace.
	return allowedKind(objs, id, v, legion.KindService, what, namespace)
}

// allowedKind checks a user's RoleBindings for v on objects of kind in a
// namespace; the cluster admin and managers may do anything.
func allowedKind(objs Objects, id pki.Identity, v rbac.Verb, kind legion.Kind, what, namespace string) error {
	if id.Role != pki.RoleUser {
		return nil
	}
	bindings, err := rbac.BindingsOf(objs.List, id.Name)
	if err != nil {
		return status.Errorf(codes.Unavailable, "reading the roles of %s: %v", id.Name, err)
	}
	// Refused in the words of what was asked: an exec is checked as a
	// write of the namespace's Services, which "to write Services" hid.
	if err := rbac.CheckAction(bindings, id.Name, v, kind, namespace, "use "+what); err != nil {
		return status.Errorf(codes.PermissionDenied, "%s: %v", what, err)
	}
	return nil
}

// sessionsCaller is the node a Sessions call acts for, and how sure that is.
type sessionsCaller struct {
	node string
	// cert is the fingerprint of the certificate presented.
	cert string
	// proven: the certificate is one recorded for the node, so it may take
	// over the node's stream. Without a record (a node that joined before
	// records were kept, or the host node of `legion up`, which its
	// manager serves) nothing tells two certificates apart.
	proven bool
}

// node checks the caller of Sessions: a node certificate the cluster
// issued the node it names (its record holds it), acting for its own node
// (asked empty or its name). A manager's may also act for a node that has
// no record of its own, such as the node of `legion up`, named after its
// host rather than after its manager's certificate; never for a node that
// joined with its own certificate.
func (s *Service) node(ctx context.Context, asked string) (sessionsCaller, error) {
	id, leaf, ok := peerCert(ctx)
	if !ok {
		return sessionsCaller{}, status.Error(codes.Unauthenticated, "a node certificate of this cluster is required")
	}
	if id.Role != pki.RoleWorker && id.Role != pki.RoleManager {
		return sessionsCaller{}, status.Errorf(codes.PermissionDenied, "sessions are served to nodes: %s holds a %s certificate", id.Name, id.Role)
	}
	objs, err := s.objects()
	if err != nil {
		return sessionsCaller{}, err
	}
	if err := dispatcher.Revoked(objs, leaf); err != nil {
		return sessionsCaller{}, err
	}
	own, err := recorded(objs, id.Name)
	if err != nil {
		return sessionsCaller{}, err
	}
	if own != nil && !own.Holds(leaf) {
		return sessionsCaller{}, status.Errorf(codes.PermissionDenied, "node %s: the certificate presented (serial %s) is not one this cluster issued to node %s",
			id.Name, leaf.SerialNumber.Text(16), id.Name)
	}
	c := sessionsCaller{node: id.Name, cert: pki.Fingerprint(leaf), proven: own != nil}
	if asked == "" || asked == id.Name {
		return c, nil
	}
	if id.Role != pki.RoleManager {
		return sessionsCaller{}, status.Errorf(codes.PermissionDenied, "node %s may take only its own sessions, not node %s's", id.Name, asked)
	}
	other, err := recorded(objs, asked)
	if err != nil {
		return sessionsCaller{}, err
	}
	if other != nil {
		return sessionsCaller{}, status.Errorf(codes.PermissionDenied, "manager %s may not take the sessions of node %s, which holds its own certificate", id.Name, asked)
	}
	return sessionsCaller{node: asked, cert: c.cert}, nil
}

// recorded is node's certificate record in the replica, nil without one.
func recorded(objs Objects, node string) (*pki.NodeCerts, error) {
	o, _, err := objs.Get(legion.KindConfig, legion.SystemNamespace, pki.NodeCertsConfig(node))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "node %s: reading its certificate record: %v", node, err)
	}
	c, ok := o.(*legion.Config)
	if !ok {
		return nil, status.Errorf(codes.Internal, "node %s: its certificate record is a %s, not a Config", node, o.GetKind())
	}
	r, err := pki.ParseNodeCerts(c.Spec.Data)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node %s: %v", node, err)
	}
	return r, nil
}

// objects is this manager's replica, or UNAVAILABLE off a manager.
func (s *Service) objects() (Objects, error) {
	if o := s.src(); o != nil {
		return o, nil
	}
	return nil, status.Error(codes.Unavailable, "this daemon is not a manager of a cluster: ask a manager")
}

// stopped is closed at shutdown (never, without Options.Stopping).
func (s *Service) stopped() <-chan struct{} { return s.stopping }

var errStopping = status.Error(codes.Unavailable, "this manager is shutting down: ask another")
