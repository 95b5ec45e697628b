package server

import (
	"context"
	"time"
)

// How a manager tells its operator that the cluster is frozen. Raft's own
// log says only that each vote request fails, every few seconds; the
// operator needs to hear which managers the cluster waits for and, if they
// are gone for good, how to restart it from this one.
const (
	FrozenCheck = 5 * time.Second // how often a manager with no leader looks (exported for tests)
	frozenEvery = 5 * time.Minute // how often the warning is repeated
)

// watchFrozen warns, once no leader has been known for a write timeout
// (writes have been failing that long) and too few voters answer for one
// to be elected, what the cluster waits for and how to restart it from
// this manager's own store; of a manager that was removed, it says that
// instead (sayRemoved).
func (s *Server) watchFrozen() {
	defer s.wg.Done()
	t := time.NewTicker(FrozenCheck)
	defer t.Stop()
	var since, warned time.Time
	for {
		select {
		case <-s.stopping():
			return
		case <-t.C:
		}
		st := s.store()
		if st == nil {
			continue
		}
		if _, id := st.Leader(); id != "" {
			since, warned = time.Time{}, time.Time{}
			continue
		}
		if s.selfRemoved() {
			// Not frozen: the others refuse it, as they should, and the
			// way back is a join, not a cluster made of its data.
			s.sayRemoved()
			continue
		}
		now := time.Now()
		if since.IsZero() {
			since = now
		}
		if now.Sub(since) < s.writeTimeout() || (!warned.IsZero() && now.Sub(warned) < frozenEvery) {
			continue
		}
		ctx, cancel := context.WithTimeout(s.watchCtx, 2*reachProbe)
		f, ok := s.frozen(ctx, st)
		cancel()
		if !ok {
			continue // an election that a majority can still win
		}
		warned = now
		s.log.Warn("no leader for "+now.Sub(since).Round(time.Second).String()+": "+f.String()+
			"; if they are gone for good, stop this daemon, run `legion restore --data-dir "+s.cfg.DataDir+
			"` (it makes this manager a cluster of one from its own store) and start it again; then join other managers from empty data directories",
			"node", s.nodeID)
	}
}
