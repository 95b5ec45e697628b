package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// agentConn is one node's open Sessions stream with this manager.
type agentConn struct {
	node   string
	cert   string // fingerprint of the certificate it was opened with
	offers chan *legionpb.SessionOffer
	gone   chan struct{} // closed when the stream ends
}

// session is an offered session waiting for, then joined to, the agent's
// Attach.
type session struct {
	id   string
	node string
	// attached receives the agent's stream once; the Attach handler then
	// waits on done, whose closing ends the agent's side.
	attached chan legionpb.Sessions_AttachServer
	done     chan struct{}
	once     sync.Once
	// gone is closed when the sessions stream the offer went out on
	// ends: an agent that stopped or lost its connection will not attach.
	gone <-chan struct{}
}

func (ss *session) finish() { ss.once.Do(func() { close(ss.done) }) }

type sessionsServer struct {
	legionpb.UnimplementedSessionsServer
	s *Service
}

// Sessions keeps a node's stream of offers. The newest stream of a node
// replaces an older one (whose connection may be dead without this
// manager knowing yet) only if it proves to be the node's: its certificate
// is recorded for the node, or, for a node with no record, it is the
// certificate the open stream came with.
func (h sessionsServer) Sessions(req *legionpb.SessionsRequest, stream legionpb.Sessions_SessionsServer) error {
	s := h.s
	who, err := s.node(stream.Context(), req.Node)
	if err != nil {
		return err
	}
	name := who.node
	c := &agentConn{node: name, cert: who.cert, offers: make(chan *legionpb.SessionOffer), gone: make(chan struct{})}
	s.mu.Lock()
	if old := s.agents[name]; old != nil && !who.proven && old.cert != who.cert {
		s.mu.Unlock()
		return status.Errorf(codes.AlreadyExists, "node %s already holds a sessions stream with this manager under another certificate, "+
			"and no certificate is recorded for the node to tell which is its own", name)
	}
	s.agents[name] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.agents[name] == c {
			delete(s.agents, name)
		}
		s.mu.Unlock()
		close(c.gone)
	}()
	s.log.Debug("node's sessions stream open", "node", name)
	if err := stream.Send(&legionpb.SessionOffer{}); err != nil {
		return err
	}
	_, leaf, _ := peerCert(stream.Context())
	recheck := time.NewTicker(pki.Recheck)
	defer recheck.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case <-s.stopped():
			return errStopping
		case <-recheck.C:
			// A node removed since the stream opened is let go, saying why.
			objs, err := s.objects()
			if err != nil {
				return err
			}
			if err := dispatcher.Revoked(objs, leaf); err != nil {
				return err
			}
		case o := <-c.offers:
			if err := stream.Send(o); err != nil {
				return err
			}
		}
	}
}

// Attach joins the agent's stream to the session it names and holds it
// until the session ends.
func (h sessionsServer) Attach(stream legionpb.Sessions_AttachServer) error {
	s := h.s
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	s.mu.Lock()
	var asked string
	if ss := s.sessions[first.Session]; ss != nil {
		asked = ss.node
	}
	s.mu.Unlock()
	// A worker attaches only to its own node's sessions.
	who, err := s.node(ctx, asked)
	if err != nil {
		return err
	}
	name := who.node
	s.mu.Lock()
	ss := s.sessions[first.Session]
	if ss != nil && ss.node == name {
		delete(s.sessions, first.Session) // one Attach per offer
	}
	s.mu.Unlock()
	if ss == nil {
		return status.Errorf(codes.NotFound, "no session %q waits on this manager", first.Session)
	}
	if ss.node != name {
		return status.Errorf(codes.PermissionDenied, "session %s is node %s's, not node %s's", first.Session, ss.node, name)
	}
	select {
	case ss.attached <- stream:
	case <-ss.done:
		return status.Error(codes.Canceled, "the session ended before the agent attached")
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	select {
	case <-ss.done:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// Connected reports whether the node's agent holds a Sessions stream with
// this manager.
func (s *Service) Connected(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[node] != nil
}

// offer sends o to the node's agent and returns the session, to be ended
// with finish. UNAVAILABLE when the agent holds no stream here.
func (s *Service) offer(ctx context.Context, nodeName string, o *legionpb.SessionOffer) (*session, error) {
	var b [16]byte
	rand.Read(b[:])
	o.Id = hex.EncodeToString(b[:])
	ss := &session{id: o.Id, node: nodeName, attached: make(chan legionpb.Sessions_AttachServer), done: make(chan struct{})}
	s.mu.Lock()
	c := s.agents[nodeName]
	if c != nil {
		ss.gone = c.gone
		s.sessions[o.Id] = ss
	}
	s.mu.Unlock()
	if c == nil {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is not connected to this manager: the node may be down or cut off", nodeName)
	}
	var err error
	select {
	case c.offers <- o:
		return ss, nil
	case <-c.gone:
		err = status.Errorf(codes.Unavailable, "the agent of node %s went away before it took the session", nodeName)
	case <-ctx.Done():
		err = status.FromContextError(ctx.Err()).Err()
	}
	s.forget(ss)
	return nil, err
}

// forget ends a session and drops it if no agent took it.
func (s *Service) forget(ss *session) {
	ss.finish()
	s.mu.Lock()
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	s.mu.Unlock()
}
