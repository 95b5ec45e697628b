package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/legionbsd/legion/cluster/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// caller is who is on the other end of a call.
type caller struct {
	id       *pki.Identity // nil without a verified certificate
	loopback bool
}

func callerOf(ctx context.Context) caller {
	var c caller
	p, ok := peer.FromContext(ctx)
	if !ok {
		return c
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		c.loopback = a.IP.IsLoopback()
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
		id := pki.IdentityOf(ti.State.PeerCertificates[0])
		c.id = &id
	}
	return c
}

type callerKey struct{}

// authorize decides whether a call may go on, by method, the daemon's
// state and the caller's certificate.
func (s *Server) authorize(ctx context.Context, method string) (context.Context, error) {
	c := callerOf(ctx)
	ctx = context.WithValue(ctx, callerKey{}, c)
	role := s.role()
	if method == unlockMethod || role == roleLocked {
		return s.authorizeLocked(ctx, method, c, role)
	}
	switch method {
	case "/legion.v1.Cluster/Init", "/legion.v1.Cluster/JoinCluster":
		// The handlers refuse a daemon that is already a member.
		if role == "" && !c.loopback {
			return nil, status.Error(codes.PermissionDenied, "init and join are taken only from the daemon's own host")
		}
		if role != "" && !isAdmin(c) {
			return nil, s.alreadyMember(role, c.loopback)
		}
		return ctx, nil
	case "/legion.v1.Cluster/Status":
		// A daemon that serves no API still tells its own host what it is.
		if role != roleManager && c.loopback {
			return ctx, nil
		}
	case "/legion.v1.Cluster/Join":
		// The join token authenticates; the handler checks it.
		if role != roleManager {
			return nil, s.notServing(role)
		}
		return ctx, nil
	}
	if role == roleManager && method != "/legion.v1.Cluster/Status" && s.selfRemoved() {
		if strings.HasPrefix(method, "/legion.v1.Dispatcher/") || strings.HasPrefix(method, "/legion.v1.Sessions/") {
			return nil, notApplied("manager %s was removed from the cluster: ask another manager", s.nodeID)
		}
		return nil, s.removedError()
	}
	if strings.HasPrefix(method, "/legion.v1.Dispatcher/") || strings.HasPrefix(method, "/legion.v1.Sessions/") {
		// Agents of every node; the service acts only for the node the
		// certificate names. Unavailable (not a refusal) off a manager,
		// so agents go on to the next one.
		if role != roleManager {
			return nil, notApplied("this daemon is not a manager: ask another")
		}
		if c.id == nil {
			return nil, status.Error(codes.Unauthenticated, "a node certificate of this cluster is required")
		}
		return ctx, nil
	}
	if role != roleManager {
		return nil, s.notServing(role)
	}
	if c.id == nil {
		return nil, status.Error(codes.Unauthenticated, "a client certificate of this cluster is required")
	}
	if c.id.Role == pki.RoleManager {
		// A removed manager's certificate, what it forwards included.
		if err := s.managerRevoked(ctx); err != nil {
			return nil, err
		}
		if name, ok := forwardedUser(ctx); ok {
			// A follower passed on a user's call: from here on it is
			// the user's, whose rights this manager checks again.
			c.id = &pki.Identity{Name: name, Role: pki.RoleUser}
			ctx = context.WithValue(ctx, callerKey{}, c)
		}
	}
	managerOnly := strings.HasPrefix(method, "/legion.v1.Raft/") || method == "/legion.v1.Cluster/Promote"
	switch {
	case c.id.Role == pki.RoleManager:
	case c.id.Role == pki.RoleAdmin && !managerOnly:
	case c.id.Role == pki.RoleUser && (strings.HasPrefix(method, "/legion.v1.Objects/") || strings.HasPrefix(method, "/legion.v1.Pods/") ||
		strings.HasPrefix(method, "/legion.v1.Volumes/") || method == usageMethod || method == eventsMethod):
		// The handlers check the user's RoleBindings per object.
	default:
		return nil, status.Errorf(codes.PermissionDenied, "%s: not allowed for a %s certificate (%s)", method, c.id.Role, c.id.Name)
	}
	return ctx, nil
}

func isAdmin(c caller) bool {
	return c.id != nil && (c.id.Role == pki.RoleAdmin || c.id.Role == pki.RoleManager)
}

// alreadyMember answers init or join on a daemon that belongs to a
// cluster, saying what to do instead. Its own host is told where the
// admin credentials are, if this manager wrote them.
func (s *Server) alreadyMember(role string, loopback bool) error {
	if role == roleWorker {
		return status.Error(codes.FailedPrecondition, "this daemon is already a worker of a cluster (joined): it serves no API; run legion status with --server pointing at a manager")
	}
	admin := "the cluster's admin credentials (admin.pem, written by the manager that ran init)"
	if path := filepath.Join(s.cfg.DataDir, AdminFile); loopback {
		if _, err := os.Stat(path); err == nil {
			admin = "the admin credentials at " + path
		}
	}
	return status.Errorf(codes.FailedPrecondition, "this daemon is already a manager of a cluster (initialised, or joined as one): nothing to do; see the cluster with legion status, using %s", admin)
}

func (s *Server) notServing(role string) error {
	if role == roleWorker {
		return status.Error(codes.FailedPrecondition, "this node is a worker and serves no API: point --server at a manager")
	}
	return status.Error(codes.FailedPrecondition, "this daemon belongs to no cluster yet: run legion init, or legion join")
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}

// authedStream carries the caller the interceptor found to the handler.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }
