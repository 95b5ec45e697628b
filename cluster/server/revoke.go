package server

import (
	"context"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
)

// revokeRemovedNode records, on the leader, that the node whose Node is
// being deleted is removed, before the Node goes: from then on every
// certificate issued to it so far is refused (dispatcher.Revoked). A
// manager still in the Raft membership is left alone here: it leaves
// Raft first, and its removal is recorded once it has (RecordRemoval).
// Nothing is recorded for a Node that does not exist or whose version
// does not match the delete's precondition.
func (s *Server) revokeRemovedNode(ctx context.Context, st *store.Store, name string, pre store.Precondition) error {
	o, _, err := st.Get(legion.KindNode, "", name)
	if err != nil {
		return err
	}
	if pre.Version != 0 && o.GetMetadata().Version != pre.Version {
		return store.ErrConflict
	}
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, m := range f.Configuration().Servers {
		if m.ID == raft.ServerID(name) {
			return nil
		}
	}
	return s.RecordRemoval(ctx, st, name)
}

// RecordRemoval records through the leader's store st that node was
// removed now (Config legion-system/removed-nodes) and drops its
// certificate record, so its certificates are refused by the API, the
// dispatcher, the sessions service and the Raft transport, and a join
// with a token may use its name again.
func (s *Server) RecordRemoval(ctx context.Context, st *store.Store, node string) error {
	lifetime := s.cfg.CertLifetime
	if lifetime <= 0 {
		lifetime = pki.CertLifetime
	}
	if err := dispatcher.RecordRemoval(ctx, st, node, s.cfg.Now(), lifetime); err != nil {
		return err
	}
	s.log.Info("node removed: its certificates are refused from now on", "node", node)
	return nil
}
