package dispatcher

import (
	"bytes"
	"context"
	"crypto/x509"
	"sync"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
)

// passes remembers, per node, the certificate that last passed holds on
// this manager and the cache generation it was checked at. Every node
// sends a heartbeat every HeartbeatPeriod, and all of them reach the
// leader; reading and decoding the node's certificate record and the
// removed nodes for each was most of what heartbeats cost the leader.
// The check is made again once either record changed
// (viewCache.identitiesSince) or the node presents another certificate.
type passes struct {
	mu sync.Mutex
	by map[string]pass
}

type pass struct {
	cache uint64 // the cache (viewCache.id) of the replica it was checked on
	raw   []byte // the certificate, DER
	gen   uint64
}

// still reports whether leaf passed for node on c and nothing it was
// checked against changed since.
func (p *passes) still(c *viewCache, node string, leaf *x509.Certificate) bool {
	p.mu.Lock()
	e, found := p.by[node]
	p.mu.Unlock()
	if !found || e.cache != c.id || !bytes.Equal(e.raw, leaf.Raw) {
		return false
	}
	changed, _ := c.identitiesSince(e.gen)
	return !changed
}

func (p *passes) set(node string, e *pass) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e == nil {
		delete(p.by, node)
		return
	}
	if p.by == nil {
		p.by = map[string]pass{}
	}
	p.by[node] = *e
}

// holdsStill is holds for the calls made often (a node's heartbeats and
// reports, and a follower's relaying of them): a certificate that passed is not
// checked again until a record it was checked against changes. The
// cache follows the replica a moment behind, so a removal is seen on
// the next call after the cache took it, not on the first after it was
// applied.
func (s *Service) holdsStill(ctx context.Context, st *store.Store, id pki.Identity, leaf *x509.Certificate, adopt bool) error {
	c := s.cacheOf(st)
	if s.passes.still(c, id.Name, leaf) {
		return nil
	}
	// The generation before the reading: a change the cache takes after
	// it is a change since.
	_, at := c.identitiesSince(0)
	if err := s.holds(ctx, st, id, leaf, adopt); err != nil {
		s.passes.set(id.Name, nil)
		return err
	}
	s.passes.set(id.Name, &pass{cache: c.id, raw: leaf.Raw, gen: at})
	return nil
}
