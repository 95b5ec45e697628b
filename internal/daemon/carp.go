package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/netbsd"
)

// carpPoll is how often the CARP loop looks at this manager's role, so a
// new leader forces itself master well within CARP's own failover (3 s).
const carpPoll = 250 * time.Millisecond

// carpRelease bounds giving the address up at stop, when the daemon's
// own context has ended.
const carpRelease = 5 * time.Second

// carpRole says whether this node is a manager and whether it leads.
type carpRole func() (manager, leader bool)

// ServerRole is a manager server's role as the CARP loop reads it.
func ServerRole(s *server.Server) func() (manager, leader bool) {
	return func() (bool, bool) {
		if s.Role() != server.RoleManager {
			return false, false
		}
		st := s.Store()
		return true, st != nil && st.IsLeader()
	}
}

// RunCARP holds the managers' shared API address (--vip) for as long as
// ctx lasts, once c.Setup has loaded carp: set on every change of role and every
// netbsd.CARPRefresh, held only while this node is a manager (a worker's
// daemon has no API to answer on it), and given up when ctx ends, so a
// clean stop hands it to another manager at once.
func RunCARP(ctx context.Context, c netbsd.CARP, role func() (manager, leader bool), log *slog.Logger) {
	carpLoop{c: c, role: role, poll: carpPoll, refresh: netbsd.CARPRefresh, log: log}.run(ctx)
}

type carpLoop struct {
	c       netbsd.CARP
	role    carpRole
	poll    time.Duration
	refresh time.Duration
	log     *slog.Logger
}

func (l carpLoop) run(ctx context.Context) {
	var held, wasLeader bool
	var lastSet time.Time
	release := func(rctx context.Context) {
		if err := l.c.Release(rctx); err != nil {
			l.log.Warn("giving up the API address", "err", err)
			return
		}
		held = false
		l.log.Info("API address released", "vip", l.c.Addr, "interface", l.c.Interface)
	}
	tick := time.NewTicker(l.poll)
	defer tick.Stop()
	for {
		manager, leader := l.role()
		switch {
		case manager && (!held || leader != wasLeader || time.Since(lastSet) >= l.refresh):
			if err := l.c.Hold(ctx, leader); err != nil {
				// Said every refresh while it lasts: an operator fixing the
				// link sees it take effect without a restart.
				l.log.Warn("holding the API address", "err", err)
			} else if !held || leader != wasLeader {
				l.log.Info("holding the API address", "vip", l.c.Addr, "interface", l.c.Interface, "leader", leader)
			}
			held, wasLeader, lastSet = true, leader, time.Now()
		case !manager && held:
			release(ctx)
		}
		select {
		case <-ctx.Done():
			if held {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), carpRelease)
				release(rctx)
				cancel()
			}
			return
		case <-tick.C:
		}
	}
}
