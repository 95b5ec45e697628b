package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Leadership tells whether this manager leads.
type Leadership interface{ IsLeader() bool }

// leaderChanges is a Leadership that says when to look again
// (*store.Store is one): the tasks start as the manager is elected, not
// up to a period later.
type leaderChanges interface{ LeaderChanged() <-chan struct{} }

// barrier is a Leadership that can wait until it has applied everything
// committed before the call (*store.Store is one). A new leader's
// replica may not have applied its predecessor's last writes when it is
// elected; the tasks start after the barrier, so a first planning pass
// does not plan from a state the store has already moved past (a failover
// in the scale run once had 233 of its first pass's writes refused).
type barrier interface {
	Barrier(ctx context.Context) error
}

// Task is work only the leader does; it runs until its context ends.
type Task struct {
	Name string
	Run  func(ctx context.Context) error
}

// RunWhileLeader runs the tasks for as long as this manager leads: it
// starts them when it becomes leader (once l has applied what earlier
// terms committed, when l can say) and stops them (waiting for them to
// return) as soon as it sees the leadership gone, checking every period
// and, when l says when its leader changes, at each change. It returns
// when ctx ends.
func RunWhileLeader(ctx context.Context, l Leadership, period time.Duration, log *slog.Logger, tasks ...Task) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var cancel context.CancelFunc
	var wg sync.WaitGroup
	stop := func() {
		if cancel != nil {
			cancel()
			wg.Wait()
			cancel = nil
		}
	}
	defer stop()
	tick := time.NewTicker(period)
	defer tick.Stop()
	notify, _ := l.(leaderChanges)
	settle, _ := l.(barrier)
	for {
		var changed <-chan struct{} // nil: the period alone
		if notify != nil {
			changed = notify.LeaderChanged() // before the look: no change is missed
		}
		leading := l.IsLeader()
		switch {
		case leading && cancel == nil:
			if settle != nil {
				if err := settle.Barrier(ctx); err != nil {
					if ctx.Err() != nil {
						return
					}
					// Lost the leadership meanwhile, or no quorum yet: the
					// next look tries again.
					log.Warn("leading, but the earlier terms' writes are not applied here yet; the controllers wait", "err", err)
					break
				}
			}
			log.Info("leading: starting the controllers")
			tctx, cancelTerm := context.WithCancel(context.WithValue(ctx, sinceKey{}, time.Now()))
			cancel = cancelTerm
			for _, t := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := t.Run(tctx); err != nil && tctx.Err() == nil {
						log.Error(t.Name+" stopped", "err", err)
					}
				}()
			}
		case !leading && cancel != nil:
			log.Info("no longer leading: stopping the controllers")
			stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-changed:
		}
	}
}

type sinceKey struct{}

// Since is when the leadership the context belongs to began.
func Since(ctx context.Context) time.Time {
	t, _ := ctx.Value(sinceKey{}).(time.Time)
	return t
}
