package server

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// membersTTL is how long the membership Raft calls are checked against
// is reused; reading it goes through raft's main loop.
const membersTTL = time.Second

// members caches the Raft membership of the local store.
type members struct {
	mu   sync.Mutex
	st   *store.Store
	at   time.Time
	ids  map[string]bool
	none bool // the store knows no members yet (joining)
}

func (m *members) refresh(st *store.Store) {
	if st != m.st || time.Since(m.at) > membersTTL {
		m.st, m.at = st, time.Now()
		f := st.Raft().GetConfiguration()
		if f.Error() != nil {
			return
		}
		m.take(st, f.Configuration())
	}
}

// take keeps cfg, read from st just now by the caller (a status, which
// reads it anyway, so says what holds now).
func (m *members) take(st *store.Store, cfg raft.Configuration) {
	m.st, m.at = st, time.Now()
	m.ids = map[string]bool{}
	for _, s := range cfg.Servers {
		m.ids[string(s.ID)] = true
	}
	m.none = len(m.ids) == 0
}

// checkMember refuses Raft calls from a manager outside this store's
// membership (a removed one, or one of another cluster restored from the
// same backup), unless this manager knows no members yet, as when it is
// joining and the leader's first calls arrive.
func (s *Server) checkMember(ctx context.Context) error {
	st := s.store()
	if st == nil {
		return notApplied("raft: this manager's store is not open")
	}
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok || c.id == nil {
		c = callerOf(ctx)
	}
	if c.id == nil {
		return status.Error(codes.Unauthenticated, "raft: a manager certificate is required")
	}
	s.members.mu.Lock()
	defer s.members.mu.Unlock()
	s.members.refresh(st)
	if s.members.none || s.members.ids[c.id.Name] {
		return nil
	}
	// The membership may have grown since it was read: read it again once.
	s.members.at = time.Time{}
	s.members.refresh(st)
	if s.members.none || s.members.ids[c.id.Name] {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "raft: manager %s is not a member of this cluster", c.id.Name)
}
