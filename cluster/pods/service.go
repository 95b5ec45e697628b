package pods

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/legionbsd/legion"
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
}

// Service serves Pods and Sessions on one manager.
type Service struct {
	src      Source
	log      *slog.Logger
	attachIn time.Duration
	stopping <-chan struct{}

	mu       sync.Mutex
	agents   map[string]*agentConn // by node name: its newest Sessions stream
	sessions map[string]*session   // offered, by id
}

// New makes the service of the manager whose objects src gives.
func New(src Source, o Options) *Service {
	s := &Service{src: src, log: o.Logger, attachIn: o.AttachTimeout, stopping: o.Stopping,
		agents: map[string]*agentConn{}, sessions: map[string]*session{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.attachIn <= 0 {
		s.attachIn = DefaultAttachTimeout
	}
	return s
}

// RegisterOn adds both services to a gRPC server (the manager's port).
func (s *Service) RegisterOn(g grpc.ServiceRegistrar) {
	legionpb.RegisterPodsServer(g, podsServer{s: s})
	legionpb.RegisterSessionsServer(g, sessionsServer{s: s})
}

// identity is the verified client certificate's identity.
func identity(ctx context.Context) (pki.Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return pki.Identity{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return pki.Identity{}, false
	}
	return pki.IdentityOf(ti.State.PeerCertificates[0]), true
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
	if id.Role != pki.RoleUser {
		return nil
	}
	bindings, err := rbac.BindingsOf(objs.List, id.Name)
	if err != nil {
		return status.Errorf(codes.Unavailable, "reading the roles of %s: %v", id.Name, err)
	}
	// A session reads or writes the pod, as a Task of the namespace.
	if err := rbac.Check(bindings, id.Name, v, legion.KindService, namespace); err != nil {
		return status.Errorf(codes.PermissionDenied, "%s: %v", what, err)
	}
	return nil
}

// node checks the caller of Sessions: a node certificate, acting for its
// own node (asked empty or its name). A manager's may act for any node:
// it holds the cluster's state already, and the node of `legion up` is
// named after its host, not after its manager's certificate.
func node(ctx context.Context, asked string) (string, error) {
	id, ok := identity(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "a node certificate of this cluster is required")
	}
	if id.Role != pki.RoleWorker && id.Role != pki.RoleManager {
		return "", status.Errorf(codes.PermissionDenied, "sessions are served to nodes: %s holds a %s certificate", id.Name, id.Role)
	}
	if asked == "" || asked == id.Name {
		return id.Name, nil
	}
	if id.Role == pki.RoleManager {
		return asked, nil
	}
	return "", status.Errorf(codes.PermissionDenied, "node %s may take only its own sessions, not node %s's", id.Name, asked)
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
